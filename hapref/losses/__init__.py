"""hapref.losses."""

# HAP-VR base loss, pseudo labels and Eq. 15 objective
from hapref.losses.hapvr_objective import WEIGHT_PRESETS, HAPVRObjective, HAPVRWeights, frame_level_ap_loss
from hapref.losses.infonce import InfoNCE
from hapref.losses.pseudo_labels import frame_pseudo_labels, teacher_frame_similarity
from hapref.losses.similarity_regularization import similarity_regularization
from hapref.losses.sshn import SSHN
