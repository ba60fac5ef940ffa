"""Training for every pipeline of the book: one generic loop plus one module per pipeline.

``fit(task, TrainConfig(...))`` trains any :class:`Task`; ``python -m hapref.train <pipeline>``
runs a registered pipeline (see :data:`PIPELINES`) at a named profile; ``load_run(folder)`` gives back the
trained model of a run folder with its recorded settings and preprocessing (e.g. the PCA whitening).
"""

from hapref.train.loop import Task, TrainConfig, TrainResult, fit, load_checkpoint, load_run, lr_factor
from hapref.train.registry import PIPELINES, load_pipeline

__all__ = ["PIPELINES", "Task", "TrainConfig", "TrainResult", "fit", "load_checkpoint", "load_pipeline", "load_run",
           "lr_factor"]
