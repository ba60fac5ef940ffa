"""TCA on chapter 6's benchmarks, seeds × data seeds (issue 29).

    python benchmarks/tca_sweeps.py --seeds 0 1 2 3 4 --data-seed 0          # headline rows, edit-subspace benchmark
    python benchmarks/tca_sweeps.py --seeds 0 1 2 3 4 --data-seed 1
    python benchmarks/tca_sweeps.py --seeds 0 1 2 3 4 --data-seed 0 --variants lstm gru netvlad momentum0.1 ...
    python benchmarks/tca_sweeps.py --profile stock --seeds 0 1 2 3 4 --data-seed 0   # the pixel-level attempt
    python benchmarks/tca_sweeps.py --profile edits-smoke --steps 2 --seeds 0 --variants tca --out /tmp/s.json
    python benchmarks/tca_sweeps.py --profile context --seeds 0 1 2 3 4 --data-seed 0 --variants tca mlp \
        untrained_network                                                 # the benchmark where context is the signal

Three benchmarks, one file each (:data:`OUTS`); the third, ``context``, is described at the end of this docstring.

* ``edits`` (``book/data/tca_sweeps.json``, the chapter's experiment): frame descriptors drawn from a stated model
  (:mod:`hapref.data.descriptors`). Edits move every frame of a copy inside a fixed 48-of-64-dimensional subspace
  that the original content uses only weakly; the edits fill it up to the variance of the other directions, so PCA
  whitening sees a flat spectrum and cosine or Chamfer count the edit as evidence. Two views of one clip differ
  almost only inside the subspace, so contrastive training on view pairs can learn to discount it. Two of each
  video's four shots come from a pool of eight stock shots shared by unrelated videos. 1,024 unlabeled clips with
  four 12-frame views, 512 distractor clips for the bank; evaluation on 50 held-out edited queries, 4 copies each
  and 400 distractors, all drawn afresh (only the subspace and the stock pool, the design, are shared).
* ``stock`` (``book/data/tca_stock_sweeps.json``): the book's pixel copy benchmark where every video opens with
  one of four stock shots (``hapref.data.benchmark.PROFILES["stock"]``), L3-iRMAC / iMAC of the frozen
  EfficientNet-Lite0. Training does not beat the training-free similarities there (numbers below).

``--data-seed N`` draws another instance of the benchmark from the same design. Everything runs in float64
(``hapref.utils.portable_precision``) on one torch thread; each finished run is appended to ``--out`` through
``benchmarks/measure.SweepFile``, which resumes an interrupted sweep.

Budget (edits, measured on this machine's CPU, one thread, before sweeping): a Transformer run of 300 steps takes
10-12 s, InfoNCE 7-11 s, an LSTM or GRU run 4-10 s at this size (12 frames), NetVLAD 2-5 s; the training-free
similarities 1 s per instance. Headline 3 variants plus 16 Table 1 rows (5 seeds × 2 instances each = 190 runs)
took 1,284 s of one core, run as two processes side by side (stored as ``wall_seconds`` / ``cpu_seconds``); the
stock sweep took the time stored in its own file.

Stored (the book's sweep layout):

* ``runs[variant]``: one row per (seed, data seed), DSVR on the held-out benchmark. ``mAP``/``uAP``: TCA_f, the
  Chamfer similarity of the refined frames (TCA Eq. 8; the paper's best measure, its Table 1f), chosen as the
  headline before any run; ``mAP_c``/``uAP_c``: TCA_c, the cosine of the video descriptors (Eq. 10);
  ``mAP_sym``: symmetric Chamfer (Eq. 9). Controls on the same trained model: ``mAP_context_free`` /
  ``mAP_c_context_free`` (every frame through the encoder alone, so no frame sees the others) and
  ``mAP_shuffled`` / ``mAP_c_shuffled`` (every database video's frames shuffled). ``curve``: TCA_f mAP every
  :data:`CURVE_EVERY` steps for the ``tca`` runs. NetVLAD has no frame outputs: its rows hold ``mAP_c`` only.
* ``untrained[data seed]``: every training-free similarity of the chapter on the same whitened descriptors —
  cosine of the means, Chamfer and symmetric Chamfer (on the pixel benchmark: on L3-iRMAC and on iMAC)
  (:func:`training_free`).
* ``untrained[data seed]`` on the edit-subspace benchmark also holds the closed-form baselines (issue 42,
  :func:`closed_form`): ``view_difference <measure>`` (:class:`hapref.features.ViewDifferenceProjection`, the
  principal directions of the differences between views of one clip projected out) and ``within_clip_whitening
  <measure>`` (:class:`hapref.features.WithinClipWhitening`), both fitted on the instance's unlabeled training
  views without labels or gradients and applied to the whitened descriptors, each also fitted on the first 64
  clips only (``_64``, the clip curve's smallest point); and ``tmk``, the temporal match kernel
  (:func:`hapref.similarity.temporal_match_kernel`) on the whitened descriptors.
* ``validation``: the settings of those baselines, chosen on data seed :data:`VALIDATION_SEED` (an instance used
  for nothing else) by :func:`tune_on_validation`, with every score of the search.
* ``claims``: :data:`CLAIMS` (:data:`STOCK_CLAIMS` for the stock file), each checked by
  ``hapref.stats.claim_holds`` (``tests/test_sweep_claims.py``, ``tests/test_tca_sweeps.py``).

Designs tried, the edit-subspace benchmark (float32 exploration, seed 0, data seed 0, 50 queries, DSVR mAP on the
held-out set, 300 steps of the paper's configuration unless stated; "TCA" = TCA_f / TCA_c):

=====================================================================  ======================  ===================
design                                                                 best training-free      trained
=====================================================================  ======================  ===================
every copy's frames shifted by one vector in a random direction          Chamfer 0.114;          TCA 0.07 / 0.03
(norm 2, "a logo on every frame"), 2 of 4 shots stock, no whitening      mean-subtracted 0.987   (Circle loss flat)
  the same, InfoNCE + in-batch negatives / a hand loop, 1,500 steps      (a training-free fix)   0.07 / 0.05; 0.33
  the same shift with norm 1.0 / 0.7                                     Chamfer 0.84 / 0.97     0.61-0.71 / 0.94
isotropic per-frame noise (norm 1.5 / 2.0), no edit                      Chamfer 0.97 / 0.76     0.95 / 0.71
  (context-free control: TCA_f 0.92 / 0.63, so the context helped here, but training stayed below Chamfer)
mixing the video mean into every frame, x + k·mean (k = 0.5 ... ∞),      no k beats plain Chamfer by more than 0.02
  new stock shots at test time, 8-frame copies (a training-free check)
edits in a fixed 16-d subspace, more variance there than elsewhere       Chamfer 0.08            0.78 / 0.32
  (PCA whitening, the pipeline's first step, would find that subspace; context-free TCA_f 0.91)
**flat-variance edit subspace, r = 48 of 64, noise 0.5 (kept)**          sym. Chamfer 0.61       0.93 / 0.65
  the same with r = 32 (too easy) / noise 1.0 / without whitening        0.975 / 0.33 / 0.62     0.99 / 0.63 / 0.82
  single unrelated cut-in frames replacing 4 of 12 frames per view       0.17                    0.35 (context-free
  (a design where only context could spot the odd frame out)                                     0.47); dropped
the ideal per-frame map (projection off the true subspace) plus the clip  Chamfer off E: 0.971 /  best k: +0.005 /
  mean mixed into every frame, x + k·mean (k = 0.5 ... 100), with 2 / 3   0.844 / 0.567 (3 stock  +0.005 / +0.03: the
  stock shots / 3 and noise 1.0 (what uniform attention could add)       and noise 1.0)          context has no room
=====================================================================  ======================  ===================

In every design the context-free control scored TCA_f at least as high as the encoder's own output whenever
training paid: self-attention blends frames that Chamfer wants sharp, and TCA_c (a mean) is unchanged by it. The
chapter reports this as measured.

Closed-form and temporal-kernel baselines (issue 42; float64, measured after the trained rows above were stored).
Settings chosen on the validation instance (data seed 10): the projection's rank over 8, 16, ..., 56 by Chamfer
mAP (0.552, 0.636, 0.692, 0.783, 0.861, **0.984 at 48**, 0.913: the rank of the design's edit subspace);
TMK's period over 24 / 32 / 48 frames and β over 4, 16, 64, 256, 1024 (m = P / 2 frequencies): the sharper the
kernel the better (period 24: 0.501, 0.756, 0.862, 0.896, **0.902**), i.e. TMK at its limit of exact frame
alignment at the best offset. Within-clip whitening has nothing to choose (its floor, 1e-6 of the mean
eigenvalue, was not searched). On the stored instances 0 / 1 (DSVR mAP):

==========================================================  ===================  ====================
training-free method                                         all 1,024 clips      first 64 clips
==========================================================  ===================  ====================
PCA whitening (the pipeline's input), symmetric Chamfer      0.612 / 0.623        -
view-difference projection (rank 48), cosine / Chamfer /     0.900 / 0.886,       0.806 / 0.798,
  symmetric Chamfer                                          0.975 / 0.986,       0.978 / 0.970,
                                                             0.990 / 0.989        0.987 / 0.987
within-clip whitening, cosine / Chamfer / symmetric Chamfer  0.818 / 0.769,       0.709 / 0.685,
                                                             0.981 / 0.985,       0.975 / 0.976,
                                                             **0.993 / 0.993**    0.984 / 0.983
TMK (period 24, β = 1024), on the PCA-whitened descriptors   0.945 / 0.930        -
==========================================================  ===================  ====================

Trained TCA_f (0.896-0.937 over 10 runs) and the best trained row (bank 0 + in-batch, 0.930-0.964) stay below
within-clip whitening on every run, TCA with 64 clips (0.80-0.84) below its 64-clip fit, TCA_c (0.50-0.60) below
the projection's cosine of the means, and TCA_f below TMK on every run. Re-checked before storing the claims, on
seeds 5-7 of the unused instances 2 and 3 (the closed-form entries with the same validation settings; tca,
tca_clips64 and bank0_in_batch retrained there): every claim held on all 6 runs, with mean gaps 0.108 (within-clip
whitening over TCA_f; instance 3: 0.989 against 0.855-0.877), 0.054 (over bank 0 + in-batch), 0.187 (64 clips),
0.364 (the projection's cosine over TCA_c) and 0.028 (TMK over TCA_f, smallest gap 0.016; TMK 0.932 / 0.893 there);
the margins (0.05, 0.02, 0.1, 0.2, 0.01) sit below both the stored and the re-checked mean gaps. On instance 2 the
projection + symmetric Chamfer tied within-clip whitening (both 0.995) and on instance 3 the projection's 64-clip fit
led (0.993 against 0.989): the closed-form estimators tie at the top. The benchmark is a linear problem (edits
in a fixed subspace, shared by all clips): the within-clip covariance of view pairs estimates that subspace from
second moments, which is the answer contrastive training of a per-frame map converges towards.

Designs tried, the stock benchmark (float32 exploration, seed 0, data seed 0; TCA_f / TCA_c):

=======================================================================  ===================  ===============
design                                                                    best training-free   trained
=======================================================================  ===================  ===============
chapter 3's benchmark ("quick"), 32 clips, 8-frame views, 100 steps       Chamfer 0.741        0.72-0.74 / 0.68-0.72
  (the previous stored sweep: 14 Table 1 rows x 3 seeds, all tied)
stock, 192 + 128 clips, 16-frame views, 200 steps, Circle, bank only      L3 cosine 0.465      0.434 / 0.460
the same, 600 steps (loss 185 -> 92; mAP every 100 steps 0.43-0.42)       0.465                0.418 / 0.448
the same, lr 2e-3 / in-batch negatives / InfoNCE tau 0.07 / dropout 0.1   0.465                0.42-0.44 / 0.44-0.47
the same with InfoNCE tau 0.07 + in-batch, dropout 0, lr 1e-3, 400 steps  0.465                0.444 / 0.454
triplet (hardest in-batch negative, margin 0.3), 400 steps                0.465                0.458 / 0.462
512 clips, 64-pixel frames, float32 (after the stored sweep)              cosine 0.420         0.416 / 0.422
960 clips, 800 steps                                                      0.420                0.412 / 0.411
=======================================================================  ===================  ===============

Where the scores go (seed 0, Chamfer scale): training raises every similarity, unrelated distractors 0.13 -> 0.30,
distractors with the query's intro 0.30 -> 0.45, copies 0.53 -> 0.62: the gap between a copy and an intro-sharing
distractor does not grow. The training distribution itself does not generalise either: with 160 of the 192 clips
for training and the other 32 held out (their second view as query, third view among 32 + 128 distractor views),
TCA_f goes from 0.341 (Chamfer on the inputs) to 0.32 after 200 steps, also with views assembled frame by frame from
the three stored views (0.30-0.32); a linear map of the frames trained with InfoNCE reaches 0.286 on the video-level
cosine at step 100 (from 0.224) and falls back to 0.269 by step 400 while its training loss drops to 0.12. With three
fixed views of a few hundred clips the encoder memorises its clips; the paper trains on VCDB's ~100K videos.

The context benchmark (issue 42, ``--profile context``, ``book/data/tca_context_sweeps.json``)
-----------------------------------------------------------------------------------------------

Written before any run. Why: on the edit-subspace benchmark what training learns is a per-frame linear map (the
context-free control scores higher, attention is uniform) and closed-form view-pair estimators beat it. A test of
the paper's mechanism needs a benchmark where a frame is ambiguous on its own and its clip says what it is. TCA's
Transformer has no positional encoding: it sees the set of a clip's frames (with multiplicities and
co-occurrences), not their order, so the signal must lie in the set, not in the order.

Real-video motivation: the same content re-uploaded by different channels carries each channel's overlay (a
logo, a watermark, a border, a colour grade), and a channel's own unrelated uploads carry the same overlay. A
frame descriptor of a copy is then close to the channel's other videos: per frame, "same channel" looks like "same
content". Channels are many and new ones appear all the time, so the overlay's direction at test time was never
seen in training: a per-frame map (linear or MLP, and the closed-form view-pair estimators, which learn one fixed
subspace) cannot remove it. What the clip reveals is what most of its frames share: the overlay, readable from the
other frames of the same set, whatever their order.

Design (:mod:`hapref.data.descriptors`, profile ``"context"``): the edits sizes (64-d, 4 shots x 4 frames, 12-frame
windows, 2 of 4 shots from a pool of 8 stock shots, drift 0.3, noise 0.5) with the edit subspace switched off
(``content_in_edits=1``) and channel overlays: a unit vector per channel, times 1.5, added to each frame of a view
with probability 0.75 (so the overlay is on most frames but not all, and subtracting the view's mean leaves a
residue). Training channels: a pool of 1,024; every evaluation query and copy is uploaded by a new channel, and
the 400 distractors by the queries' channels (8 per query). The overlay norm and share were set from training-free
numbers only (data seed 0, PCA-whitened, mAP): Chamfer 0.211 / symmetric Chamfer 0.198 / cosine 0.054;
subtracting the view's mean frame ("mean-subtracted", a training-free use of the clip) Chamfer 0.858; other
settings tried: overlay 1.0 (Chamfer 0.447, mean-subtracted 0.977: too easy for the clip's mean), overlay on every
frame (mean-subtracted 0.996: the mean removes it exactly), overlay 2.0 (mean-subtracted 0.651).

Runs: ``tca`` (the paper's configuration, the edits profile's schedule), ``mlp`` (:class:`hapref.models.PerFrameMLP`:
TCA's layer without its attention, trained the same way: the per-frame control) and ``untrained_network``; on
each the context-free and shuffled-order controls (as above). Training-free entries (``untrained``): everything
the edits sweep stores (cosine / Chamfer / symmetric Chamfer of the whitened descriptors, the view-difference
projection and within-clip whitening on all clips and on 64, TMK) plus ``mean_subtracted <measure>`` (share k of
the mean subtracted, k in :data:`MEAN_SHARES`) and the alignment scores of :mod:`hapref.similarity.alignment`
(DTW, DP alignment, temporal network, Hough voting, diagonal band) on the whitened and on the mean-subtracted
descriptors; every setting chosen on the validation instance :data:`VALIDATION_SEED` (``validation`` in the file).

Validation (data seed 10, mAP): mean share k = 0.25 / 0.5 / 0.75 / 1: Chamfer 0.287 / 0.493 / 0.772 / **0.827**;
per-pair z-scoring helps every alignment but Hough voting (DTW 0.203 -> 0.418, DP 0.171 -> 0.910, temporal network
0.301 -> **0.946**, band width 1 0.246 -> 0.721; Hough 0.604 without, 0.592 with); the projection's rank 56 (Chamfer
0.325, the largest searched: no fixed subspace holds the overlays); TMK period 24, beta 1024 (0.265).

Results (5 seeds x data seeds 0 and 1; DSVR mAP, instance 0 / instance 1, min-max over seeds for trained rows):

========================================================================  =====================================
entry                                                                      mAP (TCA_f, or the measure's)
========================================================================  =====================================
cosine / Chamfer / symmetric Chamfer of the whitened descriptors           0.054 / 0.211 / 0.198; 0.060 / 0.195 /
                                                                           0.197
view-difference projection / within-clip whitening, symmetric Chamfer      0.306 / 0.240; 0.330 / 0.228
TMK                                                                        0.259; 0.278
mean subtracted (k = 1): Chamfer / symmetric Chamfer                       0.858 / 0.875; 0.826 / 0.830
alignment, z-scored: DTW / DP / temporal network / band; Hough (raw)       0.486 / 0.922 / **0.938** / 0.730;
                                                                           0.609; 0.513 / 0.895 / **0.950** /
                                                                           0.725; 0.599
TCA (trained), TCA_f / TCA_c                                               0.205-0.221 / 0.056-0.062;
                                                                           0.203-0.212 / 0.065-0.073
  its context-free control, TCA_f                                          0.252-0.273; 0.246-0.266
  its shuffled-order control, TCA_f                                        identical to TCA_f (no positions)
per-frame MLP (trained the same way), TCA_f / TCA_c                        0.210-0.224 / 0.045-0.051;
                                                                           0.201-0.219 / 0.052-0.059
TCA initialised, not trained, TCA_f                                        0.171-0.185; 0.166-0.174
========================================================================  =====================================

Context does not pay for *training* on this design. The clip carries the answer, and training-free uses of it
find it: subtracting the view's mean frame lifts Chamfer from 0.21 to 0.83-0.88, and z-scoring each pair's
frame-to-frame matrix (which removes the offset a shared overlay adds to every cell of a same-channel pair) lets
the temporal network reach 0.94-0.95. Trained TCA learns almost none of it: TCA_f (0.20-0.22) ties the per-frame
MLP (TCA ahead on 3 of 10 paired runs, mean gap -0.003) and plain Chamfer (ahead on 8 of 10, mean +0.006), and
its own context-free control scores higher on every run (0.25-0.27): the attention mixes frames and what helps is
the per-frame part of the layer. The training curve was still rising at step 300 (seed 0, instance 0: 0.171 at
step 25, 0.208 at 300). TCA_c sits 0.006-0.017 above the per-frame MLP's cosine on every run, a real but
negligible gap at mAP 0.05-0.07.

Diagnostics (not stored in the file): five times the schedule (1,500 steps, seed 0, instance 0) plateaus at TCA_f
0.22 from step 800 on (0.224 at the end; its context-free control 0.331); the trained model's self-attention
(seed 0, instance 0, the 50 queries) is uniform: mean row entropy 2.48490 against log 12 = 2.48491, mean largest
weight 0.084 = 1/12. Uniform attention adds one vector per clip (a linear map of the clip's mean) to every frame;
subtracting the mean, the training-free answer, is such a map, but 300 or 1,500 steps of Circle loss on view
pairs did not find it.

Re-check before storing the claims, seeds 5-7 on the unused instance 2 (training-free entries with the same
validation settings): temporal network 0.938, mean-subtracted symmetric Chamfer 0.854, Chamfer 0.205; TCA_f
0.174 / 0.200 / 0.194, MLP 0.208 / 0.208 / 0.208, untrained network 0.148-0.156. Mean gaps: temporal network over
TCA 0.749 (stored runs 0.735) and over the MLP 0.730 (0.732), mean-subtracted symmetric Chamfer over TCA 0.665
(0.644), TCA over the untrained network 0.037 (0.035, smallest 0.020): the stored margins 0.5, 0.5, 0.4, 0.01 sit
below both. Not claimed: TCA_c above the MLP's cosine (it held there too, mean gap 0.007, smallest 0.002: too
thin to survive another CPU's rounding); on instance 2 the MLP and plain Chamfer were ahead of TCA_f on all 3
runs, which the stored runs do not show (ties there).
The diagnosis and the frame-level objective (issue 49, the same file)
----------------------------------------------------------------------

Why the pooled runs above do not use the clip. TCA's one-layer encoder can compute the training-free answer
exactly: query/key projections 0 (uniform attention), value projection I, output projection -k I, biases and
feed-forward 0 gives LayerNorm(x_t - k mean) (:meth:`hapref.models.TemporalContextAggregator.mean_subtracting`).
The paper's loss compares mean-pooled descriptors, and the frame mean of x_t - k mean is (1 - k) mean: the pooled
similarity cannot see what k does for the frames. ``barrier[data seed]`` stores the Circle loss of that hand-set
encoder for k in :data:`BARRIER_SHARES` under both objectives (:func:`barrier`; first 8 training batches, bank of
the encoder's own keys of the 512 distractors) and its TCA_f mAP: pooled 235 at k = 0, a barrier of 323 at k =
0.9, falling past k = 1 (and below k = 0); frame-level falls monotonically to its minimum at k = 1.2 (TCA_f 0.987
/ 0.983 there, instance 0 / 1). The attention-entropy reading of the lab notes above diagnoses nothing: uniform
attention is what this solution needs.

Frame-level objective (``Variant(objective="frame")``, :func:`hapref.train.tca.frame_contrastive_similarities`):
the same Circle loss on the Chamfer similarity of the refined frames, the bank keeping frame keys. Cost measured
before sweeping (one thread, the machine shared by five processes): about 0.27 s per step against 0.23 s for the
pooled loss, after replacing autograd through the [B, T, M, S] maximum by a gradient scattered onto the chosen key
frames (the same numbers and gradient, tested; it was 0.31 s). The first version of the step cost 0.12 s in
backward alone.

Schedule (:func:`tune_frame_schedule`, data seed 10, seed 0, stored as ``validation["frame_schedule"]``): at 300
steps, TCA_f mAP by dropout 0 / 0.2 / 0.5 x lr 1e-3 / 3e-3: 0.324 / 0.414, 0.323 / **0.437**, 0.293 / 0.301; the
long run (dropout 0.2, lr 3e-3, 1,500 steps) rose all the way, 0.271 at step 100, 0.540 at 600, 0.711 at 1,000,
0.830 at 1,500; the rule (first point within 0.01 of the best) chose 1,400 steps. The curve had not flattened:
more steps would likely score higher, beyond this sweep's time.

Stored runs (DSVR mAP, instance 0 / instance 1, min-max over seeds 0-4; TCA_f unless said). The controls
``mlp_frame_tuned``, ``tca_frame`` and ``tca_tuned`` were first stored for seeds 0-2 (the compute share of the
first pass); seeds 3 and 4 followed in a second pass on an otherwise idle core, so every variant holds 10 runs.

====================================================  ===========================  ==========================
entry                                                  instance 0                   instance 1
====================================================  ===========================  ==========================
pooled objective, profile schedule (``tca``)            0.205-0.221                  0.203-0.212
frame-level, profile schedule (``tca_frame``)           0.283-0.297                  0.277-0.294
frame-level, validated schedule (``tca_frame_tuned``)   0.823-0.838                  0.808-0.831
  its frames encoded alone                              0.330-0.362                  0.313-0.372
  clip-mean share -trace(W_o W_v)/D at the end          0.666-0.700                  0.654-0.669
per-frame MLP, frame-level, validated schedule          0.508-0.533                  0.547-0.583
pooled objective, validated schedule (``tca_tuned``)    0.103-0.115                  0.121-0.151
  its clip-mean share at the end                        -0.266 to -0.210             -0.251 to -0.196
hand-set encoder, k = 1.2 (``barrier``)                 0.987                        0.983
z-scored temporal network (training-free, best)         0.938                        0.950
====================================================  ===========================  ==========================

The pooled objective at the validated schedule drives the share negative (the encoder adds the clip mean, as the
barrier predicts and the one-parameter exercise of the chapter shows) and ends below the untrained encoder;
the frame-level objective drives it up, 0.65-0.70 after 1,400 steps and still rising. Claims (set after the
runs): frame-level tuned over ``tca`` and over the pooled-trained MLP (margin 0.5; smallest stored gaps
0.605 (mean 0.617) and 0.590 (mean 0.614)), and the temporal network over frame-level tuned (margin 0.05;
stored gaps 0.100-0.142, mean 0.118). Re-checked before storing, on seeds 5-7 of the unused instance 2
(trained on the same validated schedule; the pooled rows are issue 42's re-check above): frame-level tuned TCA_f
0.805 / 0.797 / 0.816 (frames encoded alone 0.28-0.32), temporal network 0.938,
mean-subtracted symmetric Chamfer 0.854; gaps over the pooled TCA 0.60-0.63 (mean 0.617), over the pooled MLP
0.59-0.61 (0.598), the temporal network over frame-level 0.12-0.14 (0.132): every claim held on every run, the
margins below all mean gaps.

With the controls at 5 seeds x 2 instances (second pass), four more claims, set after the runs, each with its
smallest and mean stored gap: frame-level tuned TCA over the frame-level tuned MLP (margin 0.2; 0.247, 0.286),
over the pooled objective at the same schedule (0.5; 0.666, 0.701), the frame-level tuned MLP over the
pooled-trained MLP (0.2; 0.284, 0.328), and the pooled objective at the profile's schedule over the same objective
at the validated one (0.05; 0.060, 0.085). The stored re-check ``"recheck"`` (data seed 2, seeds 5 and 6, neither
used for any choice; ``--out`` a scratch file, then copied in with its training-free rows and its time) holds
every run of every claim: all eleven hold there (frame-level tuned TCA 0.805 / 0.797, its MLP 0.478 / 0.480, the
pooled objective at the validated schedule 0.104 / 0.109, at the profile's 0.174 / 0.200, the pooled MLP 0.208 /
0.208). Commands (after the rows of issue 42):

    python benchmarks/tca_sweeps.py --profile context --seeds 0 1 2 3 4 --data-seed 0 --variants tca_frame_tuned
    python benchmarks/tca_sweeps.py --profile context --seeds 0 1 2 3 4 --data-seed 1 --variants tca_frame_tuned
    python benchmarks/tca_sweeps.py --profile context --seeds 0 1 2 3 4 --data-seed 0 --variants mlp_frame_tuned \
        tca_frame tca_tuned                                               # and the same with --data-seed 1
    python benchmarks/tca_sweeps.py --profile context --seeds 5 6 --data-seed 2 --variants tca_frame_tuned \
        mlp_frame_tuned tca_tuned tca mlp untrained_network --out /tmp/recheck.json    # stored as "recheck"
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared benchmark helpers
from measure import SweepFile, sweep_arithmetic  # noqa: E402

from hapref.features import ViewDifferenceProjection, WithinClipWhitening
from hapref.metrics import map_and_micro_ap
from hapref.similarity import alignment_similarity_matrix, temporal_match_kernel
from hapref.models import TemporalContextAggregator
from hapref.train import fit
from hapref.train.tca import (MEASURES, PROFILES, TCATask, Variant, baseline_metrics, config_for, frame_scores,
                              prepare_data)
from hapref.utils import seed_everything

PROFILE = "edits"
DATA = Path(__file__).resolve().parents[1] / "book" / "data"
#: Where each profile's sweep is stored (``--out`` replaces it).
OUTS: dict[str, Path] = {"edits": DATA / "tca_sweeps.json", "stock": DATA / "tca_stock_sweeps.json",
                         "smoke": DATA / "tca_smoke_sweeps.json", "edits-smoke": DATA / "tca_smoke_sweeps.json",
                         "context": DATA / "tca_context_sweeps.json",
                         "context-smoke": DATA / "tca_smoke_sweeps.json"}
CURVE_EVERY = 25
#: Variant name -> (TCA Table 1 row it stands for, the Variant). ``tca`` is the paper's final configuration at
#: this scale (Transformer, L3-iRMAC, Circle loss γ = 256, m = 0.25, memory-bank negatives only).
VARIANTS: dict[str, Variant] = {
    "tca": Variant(),
    "untrained_network": Variant(),                                      # initialised, not trained
    "infonce": Variant(loss="infonce", temperature=1 / 256),             # Table 1c
    "infonce_t0.07": Variant(loss="infonce", temperature=0.07),
    "imac": Variant(pooling="imac"),                                     # Table 1b
    "bank16": Variant(bank_size=16, distractors_per_step=16),            # Table 1d: 16 keys enqueued per step
    "bank0_in_batch": Variant(bank_size=0, in_batch_negatives=True),
    "in_batch": Variant(in_batch_negatives=True),                        # the extension: bank + other rows
    "triplet": Variant(loss="triplet", bank_size=0, in_batch_negatives=True),
    "lstm": Variant(aggregator="lstm"),                                  # Table 1a
    "gru": Variant(aggregator="gru"),
    "netvlad": Variant(aggregator="netvlad"),
    "mlp": Variant(aggregator="mlp"),                                    # control: per-frame, no attention
    **{f"momentum{m:g}": Variant(momentum=m) for m in (0.1, 0.9, 0.99, 0.999)},   # Table 1e
    **{f"tca_clips{n}": Variant() for n in (24, 48, 96)},               # stock's data curve: the first n clips
    **{f"tca_clips{n}": Variant() for n in (64, 128, 256, 512)},        # edits' data curve
    # the context benchmark (issue 49): the frame-level objective (the book's departure, Chamfer of the refined
    # frames against frame keys) at the profile's schedule and at the schedule chosen on validation ("_tuned")
    "tca_frame": Variant(objective="frame"),
    "tca_frame_tuned": Variant(objective="frame"),
    "mlp_frame_tuned": Variant(aggregator="mlp", objective="frame"),
    "tca_tuned": Variant(),
}
#: Variants trained on the schedule chosen on the validation instance (:func:`tune_frame_schedule`, stored as
#: ``validation["frame_schedule"]``) instead of the profile's: dropout, learning rate and steps.
TUNED = ("tca_frame_tuned", "mlp_frame_tuned", "tca_tuned")
#: Curve points of the variants that store one (TCA_f mAP and the clip-mean diagnostic over steps).
CURVES = {"tca": CURVE_EVERY, "tca_frame": CURVE_EVERY, "tca_frame_tuned": 100, "tca_tuned": 100}
HEADLINE = ["tca", "untrained_network", "infonce"]
#: The rest of Table 1 on the edit-subspace benchmark, 5 seeds x 2 instances (iMAC needs pixels: stock only).
TABLE1 = ["lstm", "gru", "netvlad", "bank16", "bank0_in_batch", "in_batch", "triplet", "infonce_t0.07",
          "momentum0.1", "momentum0.9", "momentum0.99", "momentum0.999", "tca_clips64", "tca_clips128",
          "tca_clips256", "tca_clips512"]

#: The stock sweep's claims (``book/data/tca_stock_sweeps.json``), set after its runs: Table 1a's Transformer above
#: the recurrent aggregators, in TCA_c and TCA_f. Training does not beat the training-free similarities there.
STOCK_CLAIMS: list[dict] = [{"better": "tca", "worse": w, "metric": m, "margin": 0.05}
                            for w in ("lstm", "gru") for m in ("mAP", "mAP_c")]
#: The edit-subspace sweep's claims (``book/data/tca_sweeps.json``). The headline compares the paper's configuration
#: with the best training-free entry of all, within-clip whitening + symmetric Chamfer on both instances (issue 42):
#: training LOSES, so the claim is stated that way round, with the closed-form fit on 64 clips against TCA on the
#: same 64 clips, the projection's cosine of the means against TCA_c, TMK against TCA_f, and within-clip whitening
#: against the best trained row (bank 0 + in-batch). The trained orderings were set after the runs: every Table 1
#: ordering that all 10 paired runs separate with a mean gap of at least 0.05 (chapter 6 reports the rest, and which
#: of these reverse the paper). Before storing, every claim was re-checked on seeds 5-7 of two unused instances
#: (data seeds 2 and 3): all held, each ordering on every run; the margins are set below the smallest mean gap seen
#: there (bank16: 0.039 on instance 3, so 0.02; InfoNCE at 1/256, momentum 0.999 and InfoNCE at 0.07:
#: 0.057-0.069, so 0.03; the closed-form claims: see the module docstring). bank16 (a bank of 16 keys) first
#: enqueued the profile's 32 keys per step, which the queue-overflow check now refuses; it enqueues 16 since issue
#: 49 and its 10 rows were re-run: gaps over tca 0.039-0.086, mean 0.065 (the claim still holds); on seeds 5-7
#: of instance 2 0.079-0.082.
CLAIMS: list[dict] = [
    {"better": "untrained:within_clip_whitening symmetric_chamfer", "worse": "tca", "metric": "mAP", "margin": 0.05},
    {"better": "untrained:within_clip_whitening symmetric_chamfer", "worse": "bank0_in_batch", "metric": "mAP",
     "margin": 0.02},
    {"better": "untrained:within_clip_whitening_64 symmetric_chamfer", "worse": "tca_clips64", "metric": "mAP",
     "margin": 0.1},
    {"better": "untrained:view_difference cosine", "worse": "tca", "metric": "mAP_c", "margin": 0.2},
    {"better": "untrained:tmk", "worse": "tca", "metric": "mAP", "margin": 0.01},
    *({"better": "tca", "worse": w, "metric": m, "margin": 0.05} for w in ("lstm", "gru") for m in ("mAP", "mAP_c")),
    {"better": "tca", "worse": "netvlad", "metric": "mAP_c", "margin": 0.05},
    {"better": "tca", "worse": "infonce", "metric": "mAP", "margin": 0.03},
    {"better": "bank0_in_batch", "worse": "tca", "metric": "mAP_c", "margin": 0.05},
    {"better": "bank16", "worse": "tca", "metric": "mAP_c", "margin": 0.02},
    {"better": "momentum0.999", "worse": "tca", "metric": "mAP_c", "margin": 0.03},
    {"better": "infonce_t0.07", "worse": "tca", "metric": "mAP_c", "margin": 0.03},
    {"better": "tca", "worse": "tca_clips64", "metric": "mAP", "margin": 0.05},
]
#: The context sweep's runs (``--profile context``): TCA, the per-frame control trained the same way, and TCA
#: initialised but not trained.
CONTEXT_HEADLINE = ["tca", "mlp", "untrained_network"]
#: The context sweep's claims (``book/data/tca_context_sweeps.json``), set after its 10 paired runs and re-checked
#: before storing on seeds 5-7 of the unused instance 2 (every claim held on all 3 runs; margins below the smaller
#: of the stored and re-checked mean gaps, module docstring). Training LOSES: the best training-free entry (the
#: z-scored temporal network) and the clip's mean subtracted beat TCA and the per-frame MLP by far; training only
#: beats the initialised network.
CONTEXT_CLAIMS: list[dict] = [
    {"better": "untrained:temporal_network", "worse": "tca", "metric": "mAP", "margin": 0.5},
    {"better": "untrained:temporal_network", "worse": "mlp", "metric": "mAP", "margin": 0.5},
    {"better": "untrained:mean_subtracted symmetric_chamfer", "worse": "tca", "metric": "mAP", "margin": 0.4},
    {"better": "tca", "worse": "untrained_network", "metric": "mAP", "margin": 0.01},
    # issue 49: the frame-level objective at the validated schedule, against the paper's objective and the per-frame
    # MLP trained with the paper's objective, and still below the best training-free entry
    {"better": "tca_frame_tuned", "worse": "tca", "metric": "mAP", "margin": 0.5},
    {"better": "tca_frame_tuned", "worse": "mlp", "metric": "mAP", "margin": 0.5},
    {"better": "untrained:temporal_network", "worse": "tca_frame_tuned", "metric": "mAP", "margin": 0.05},
    # and the controls (all 10 runs each, set after the runs, re-checked in "recheck"): the context pays under the
    # frame-level objective (the encoder over the per-frame MLP trained the same way), the objective is what
    # matters at the same schedule, the frame-level objective helps even a per-frame map, and the pooled objective
    # at the validated schedule ends below the profile's schedule (it adds the clip mean)
    {"better": "tca_frame_tuned", "worse": "mlp_frame_tuned", "metric": "mAP", "margin": 0.2},
    {"better": "tca_frame_tuned", "worse": "tca_tuned", "metric": "mAP", "margin": 0.5},
    {"better": "mlp_frame_tuned", "worse": "mlp", "metric": "mAP", "margin": 0.2},
    {"better": "tca", "worse": "tca_tuned", "metric": "mAP", "margin": 0.05},
]
CLAIMS_BY_PROFILE: dict[str, list[dict]] = {"edits": CLAIMS, "stock": STOCK_CLAIMS, "smoke": [],
                                            "edits-smoke": [], "context": CONTEXT_CLAIMS, "context-smoke": []}


def _round(metrics: dict) -> dict:
    return {k: round(float(v), 6) for k, v in metrics.items()}


def _settings(profile: str, steps: int | None, data_seed: int):
    p = replace(PROFILES[profile], benchmark_seed=data_seed)
    return replace(p, steps=steps) if steps is not None else p


def training_free(profile: str, data_seed: int) -> dict:
    """Every training-free similarity on one benchmark instance.

    Pixel profiles: ``{"<feature> <measure>": {"mAP", "uAP"}}`` on L3-iRMAC and iMAC. Descriptor profiles (one
    descriptor): ``{"<measure>": {"mAP", "uAP", "mAP_c", "uAP_c"}}``, the one score under both names, so that a claim
    pairs it with TCA_f (``mAP``) or TCA_c (``mAP_c``).
    """
    p = _settings(profile, None, data_seed)
    if p.descriptors is not None:
        return {m: _round({**v, "mAP_c": v["mAP"], "uAP_c": v["uAP"]})
                for m, v in baseline_metrics(p, "l3irmac").items()}
    names = {"l3irmac": "L3-iRMAC", "imac": "iMAC"}
    return {f"{names[pool]} {m}": _round(v) for pool in names for m, v in baseline_metrics(p, pool).items()}


#: The data seed on which the training-free settings (the projection's rank, TMK's period and β) are chosen:
#: an instance used for nothing else (the stored instances are 0 and 1, the claims' re-checks used 2 and 3).
VALIDATION_SEED = 10
#: TMK settings searched on the validation instance: period P in frames (>= 2 × 12 - 1, so offsets of two
#: 12-frame views do not wrap around) × concentration β, with every frequency below Nyquist (m = P // 2).
TMK_PERIODS = (24, 32, 48)
TMK_BETAS = (4.0, 16.0, 64.0, 256.0, 1024.0)
#: Clips of the small fit: the smallest point of the clip curve (``tca_clips64``, the same first 64 clips).
FEW_CLIPS = 64


def _ranks(dim: int) -> list[int]:
    """The projection ranks searched: every eighth of the descriptor size below it (8, 16, …, 56 for 64-d)."""
    step = max(dim // 8, 1)
    return list(range(step, dim, step))


def _measures(d, transform=None) -> dict:
    """mAP / μAP of every measure of ``MEASURES`` on ``d``'s benchmark, the descriptors mapped by ``transform``."""
    q, db = (d.queries, d.database) if transform is None else (transform(d.queries), transform(d.database))
    return {m: map_and_micro_ap(frame_scores(q, db, d.query_valid, d.database_valid, m), d.relevance)
            for m in MEASURES}


def tune_on_validation(profile: str = PROFILE) -> dict:
    """Choose the training-free settings on :data:`VALIDATION_SEED` (descriptor profiles only).

    The projection's ``rank`` (:class:`~hapref.features.ViewDifferenceProjection`, fitted on all training clips)
    maximises Chamfer mAP (TCA_f's measure) over :func:`_ranks`; TMK's ``(period, beta)`` maximise its mAP over
    :data:`TMK_PERIODS` × :data:`TMK_BETAS`. Returns the choice and every score of the search.
    """
    d = prepare_data(_settings(profile, None, VALIDATION_SEED))
    ranks = {}
    for rank in _ranks(d.train.shape[-1]):
        proj = ViewDifferenceProjection.fit(d.train, rank=rank)
        ranks[str(rank)] = round(float(_measures(d, proj)["chamfer"]["mAP"]), 6)
    tmk = {}
    for period in TMK_PERIODS:
        for beta in TMK_BETAS:
            scores = temporal_match_kernel(d.queries, d.database, d.query_valid, d.database_valid, period=period,
                                           frequencies=period // 2, beta=beta)
            tmk[f"{period} {beta:g}"] = round(float(map_and_micro_ap(scores, d.relevance)["mAP"]), 6)
    rank = int(max(ranks, key=lambda k: (ranks[k], -int(k))))
    period, beta = max(tmk, key=lambda k: tmk[k]).split()
    out = {"data_seed": VALIDATION_SEED, "view_difference_rank": rank, "tmk_period": int(period),
           "tmk_beta": float(beta), "chamfer_mAP_by_rank": ranks, "tmk_mAP_by_period_beta": tmk}
    return {**out, **_tune_context(d)} if _is_context(profile) else out


def _is_context(profile: str) -> bool:
    return profile.startswith("context")


#: The context benchmark's extra training-free settings, searched on :data:`VALIDATION_SEED`: the share ``k`` of
#: the view's mean frame subtracted from every frame (``x_t - k·mean``, a training-free use of the clip), and
#: each alignment score's options of :mod:`hapref.similarity.alignment` (per-pair normalisation; band width).
MEAN_SHARES = (0.25, 0.5, 0.75, 1.0)
ALIGNMENT_GRID: dict[str, list[dict]] = {
    "dtw": [{"normalize": n} for n in (None, "zscore")],
    "dp": [{"normalize": n} for n in (None, "zscore")],
    "temporal_network": [{"normalize": n} for n in (None, "zscore")],
    "hough": [{"normalize": n} for n in (None, "zscore")],
    "band": [{"width": w, "normalize": n} for w in (1, 2) for n in (None, "zscore")],
}


def _mean_subtracted(x: torch.Tensor, valid: torch.Tensor, share: float) -> torch.Tensor:
    """``x_t − share · mean_s x_s`` over each video's valid frames (padding stays 0); ``x [N, T, D]``."""
    mean = (x * valid[..., None]).sum(1, keepdim=True) / valid.sum(1)[:, None, None].clamp(min=1)
    return (x - share * mean) * valid[..., None]


def _alignment_map(d, method: str, params: dict, q=None, db=None) -> float:
    q, db = (d.queries, d.database) if q is None else (q, db)
    scores = alignment_similarity_matrix(q.unsqueeze(2), db.unsqueeze(2), d.query_valid, d.database_valid,
                                         method=method, **params)
    return map_and_micro_ap(scores, d.relevance)


def _tune_context(d) -> dict:
    """The share of :func:`_mean_subtracted` (by Chamfer mAP) and each alignment's options (by its mAP)."""
    shares = {f"{k:g}": round(float(_measures(d, lambda x, k=k: _mean_subtracted(x, torch.ones(x.shape[:2],
                                                 dtype=torch.bool), k))["chamfer"]["mAP"]), 6)
              for k in MEAN_SHARES}
    searched, chosen = {}, {}
    for method, grid in ALIGNMENT_GRID.items():
        scores = [round(float(_alignment_map(d, method, params)["mAP"]), 6) for params in grid]
        searched[method] = [[params, score] for params, score in zip(grid, scores)]
        chosen[method] = grid[max(range(len(grid)), key=lambda i: scores[i])]
    return {"mean_share": float(max(shares, key=lambda k: shares[k])), "chamfer_mAP_by_mean_share": shares,
            "alignment": chosen, "alignment_mAP_searched": searched}


def context_baselines(d, settings: dict) -> dict:
    """The context benchmark's extra training-free entries on one instance ``d`` (validation ``settings``).

    ``"mean_subtracted <measure>"``: every measure of ``MEASURES`` on ``x_t − k·mean`` (k chosen on validation);
    ``"<alignment>"`` and ``"mean_subtracted <alignment>"``: every alignment of :data:`ALIGNMENT_GRID` with its
    chosen options, on the whitened descriptors and on the mean-subtracted ones.
    """
    share = settings["mean_share"]

    def sub(x):
        return _mean_subtracted(x, torch.ones(x.shape[:2], dtype=torch.bool), share)

    out = {f"mean_subtracted {m}": v for m, v in _measures(d, sub).items()}
    for method, params in settings["alignment"].items():
        out[method] = _alignment_map(d, method, params)
        out[f"mean_subtracted {method}"] = _alignment_map(d, method, params, sub(d.queries), sub(d.database))
    return out


def closed_form(profile: str, data_seed: int, settings: dict) -> dict:
    """The view-pair estimators and TMK on one descriptor instance, with the validation ``settings``.

    ``"view_difference <measure>"`` (rank from validation) and ``"within_clip_whitening <measure>"`` fitted on the
    instance's unlabeled training views (all clips; ``_64``: the first :data:`FEW_CLIPS`, as ``tca_clips64``),
    applied to the PCA-whitened descriptors the encoder gets; ``"tmk"`` on those descriptors themselves.
    """
    d = prepare_data(_settings(profile, None, data_seed))
    out = {}
    for suffix, train in (("", d.train), (f"_{FEW_CLIPS}", d.train[:FEW_CLIPS])):
        fits = {"view_difference": ViewDifferenceProjection.fit(train, rank=settings["view_difference_rank"]),
                "within_clip_whitening": WithinClipWhitening.fit(train)}
        for name, transform in fits.items():
            for m, v in _measures(d, transform).items():
                out[f"{name}{suffix} {m}"] = v
    period = settings["tmk_period"]
    scores = temporal_match_kernel(d.queries, d.database, d.query_valid, d.database_valid, period=period,
                                   frequencies=period // 2, beta=settings["tmk_beta"])
    out["tmk"] = map_and_micro_ap(scores, d.relevance)
    if _is_context(profile):
        out.update(context_baselines(d, settings))
    return {k: _round({**v, "mAP_c": v["mAP"], "uAP_c": v["uAP"]}) for k, v in out.items()}


def _row(metrics: dict) -> dict:
    """The stored names: ``mAP`` = TCA_f (the headline), ``mAP_c`` = TCA_c (see the module docstring)."""
    rename = {"mAP": "mAP_c", "uAP": "uAP_c", "mAP_f": "mAP", "uAP_f": "uAP",
              "mAP_context_free": "mAP_c_context_free", "mAP_f_context_free": "mAP_context_free",
              "mAP_shuffled": "mAP_c_shuffled", "mAP_f_shuffled": "mAP_shuffled"}
    return {rename.get(k, k): v for k, v in _round(metrics).items()}


#: The frame-level objective's schedule search on :data:`VALIDATION_SEED` (:func:`tune_frame_schedule`): dropout
#: (0, the released code's 0.2, the paper's 0.5) x learning rate at the profile's steps, then one long run of the
#: best pair, whose TCA_f curve sets the steps: the first point within :data:`PLATEAU` of the curve's best.
FRAME_DROPOUTS = (0.0, 0.2, 0.5)
FRAME_LRS = (1e-3, 3e-3)
LONG_STEPS = 1500
PLATEAU = 0.01


def tune_frame_schedule(profile: str, steps: int | None = None, long_steps: int = LONG_STEPS) -> dict:
    """Choose the frame-level objective's dropout, learning rate and steps on :data:`VALIDATION_SEED` (seed 0).

    Every (dropout, lr) of :data:`FRAME_DROPOUTS` x :data:`FRAME_LRS` trains ``tca_frame`` for the profile's steps
    (``steps`` overrides, for tests); the best by TCA_f mAP then trains ``long_steps`` steps with TCA_f every
    ``long_steps // 15`` steps, and the chosen steps are the first curve point within :data:`PLATEAU` of its best.
    """
    grid = []
    for dropout in FRAME_DROPOUTS:
        for lr in FRAME_LRS:
            row = run_one(profile, "tca_frame", 0, VALIDATION_SEED, steps, {"dropout": dropout, "lr": lr},
                          controls=False)
            grid.append([dropout, lr, row["mAP"]])
    dropout, lr, _ = max(grid, key=lambda r: r[2])
    every = max(long_steps // 15, 1)
    long = run_one(profile, "tca_frame", 0, VALIDATION_SEED, long_steps, {"dropout": dropout, "lr": lr},
                   controls=False, curve_every=every)
    best = max(m for _, m in long["curve"])
    chosen = next(step for step, m in long["curve"] if m >= best - PLATEAU)
    return {"data_seed": VALIDATION_SEED, "seed": 0, "mAP_by_dropout_lr": grid, "dropout": dropout, "lr": lr,
            "long_steps": long_steps, "long_curve": long["curve"], "long_mean_share_curve": long["mean_share_curve"],
            "steps": int(chosen)}


#: The hand-set encoders of the barrier (:func:`barrier`): the share k of the clip mean subtracted.
BARRIER_SHARES = tuple(round(0.1 * i, 1) for i in range(-5, 16))
BARRIER_BATCHES = 8


def barrier(profile: str, data_seed: int) -> dict:
    """The training loss of the hand-set encoder ``LayerNorm(x_t − k·mean)`` along k, under both objectives.

    :meth:`hapref.models.TemporalContextAggregator.mean_subtracting` (the package's layer, LayerNorm included,
    feed-forward zeroed, the profile's sizes) at every k of :data:`BARRIER_SHARES`;
    :meth:`hapref.train.tca.TCATask.objective_value` on the first :data:`BARRIER_BATCHES` training batches of the
    instance, its bank filled with the encoder's own keys of the distractors. Also TCA_f mAP of each encoder.
    """
    p = _settings(profile, None, data_seed)
    task = TCATask(p, VARIANTS["tca"], 0)
    out: dict = {"k": list(BARRIER_SHARES), "pooled": [], "frame": [], "mAP": []}
    for k in BARRIER_SHARES:
        model = TemporalContextAggregator.mean_subtracting(p.whiten_dim, k, p.nhead, p.dim_feedforward).eval()
        for objective in ("pooled", "frame"):
            out[objective].append(round(task.objective_value(model, objective, BARRIER_BATCHES), 6))
        with torch.no_grad():
            out["mAP"].append(round(float(task.evaluate(model)["mAP_f"]), 6))
    return out


def run_one(profile: str, variant: str, seed: int, data_seed: int, steps: int | None = None,
            schedule: dict | None = None, controls: bool = True, curve_every: int | None = None) -> dict:
    """Train (``untrained_network``: only initialise) one variant with one seed; the stored row.

    ``schedule``: profile fields that replace the profile's (``dropout``, ``lr``, ``steps``; the variants of
    :data:`TUNED` get the validation's), ``steps`` (tests) replaces its steps in turn; ``controls``: also the
    context-free and shuffled controls; ``curve_every``: evaluation spacing of the stored curve (default
    :data:`CURVES`). Rows of frame-output aggregators hold the clip-mean diagnostic ``mean_share`` (and
    ``mean_share_trace`` for TCA), with ``mean_share_curve`` beside the curve.
    """
    p = replace(_settings(profile, None, data_seed), **(schedule or {}))
    p = replace(p, steps=steps) if steps is not None else p
    task = TCATask(p, VARIANTS[variant], seed)
    if variant.startswith("tca_clips"):                   # the first n training clips only (same features)
        n = int(variant.removeprefix("tca_clips"))
        task.data = replace(task.data, train=task.data.train[:n], train_valid=task.data.train_valid[:n])
    if variant == "untrained_network":
        seed_everything(seed)                             # as fit() does before it builds the model
        model = task.build_model().eval()
        history = []
        with torch.no_grad():
            metrics = task.evaluate(model)
    else:                                                 # fit's own evaluation of the last step
        every = CURVES.get(variant, 0) if curve_every is None else curve_every
        result = fit(task, replace(config_for(p, seed), eval_every=every), progress=False)
        model, history, metrics = result.model.eval(), result.history, result.metrics
    if controls:
        with torch.no_grad():
            metrics = {**metrics, **task.evaluate_controls(model)}
    row = {"seed": seed, "data_seed": data_seed, **_row(metrics)}
    curve = [[h["step"], round(float(h["mAP_f"]), 6)] for h in history if "mAP_f" in h]
    if curve:
        row["curve"] = curve
        row["mean_share_curve"] = [[h["step"], *(round(float(h[k]), 6) for k in ("mean_share", "mean_share_trace")
                                                 if k in h)] for h in history if "mean_share" in h]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=PROFILE, choices=tuple(OUTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--variants", nargs="*", default=HEADLINE, choices=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=None, help="override the profile's training steps (tests)")
    parser.add_argument("--long-steps", type=int, default=LONG_STEPS,
                        help="steps of the frame schedule's long validation run (tests)")
    parser.add_argument("--out", default=None, help="default: the profile's file of OUTS")
    args = parser.parse_args(argv)
    args.out = args.out or str(OUTS[args.profile])
    if args.profile.startswith("edits") and "imac" in args.variants:
        parser.error("variant imac needs pixels (iMAC pooling): run it with --profile stock")
    if not _is_context(args.profile) and any(v in TUNED for v in args.variants):
        parser.error(f"variants {TUNED} are trained on the context benchmark's validated schedule: --profile context")

    with sweep_arithmetic(threads=1) as dtype:
        settings = {k: v for k, v in asdict(_settings(args.profile, args.steps, 0)).items() if k != "benchmark_seed"}
        meta = json.loads(json.dumps({"profile": args.profile, "settings": settings, "task": "DSVR",
                                      "dtype": str(dtype).removeprefix("torch.")}))
        sweep = SweepFile(args.out, meta, CLAIMS_BY_PROFILE[args.profile])
        sweep.ensure_untrained(args.data_seed, lambda: training_free(args.profile, args.data_seed))
        if _settings(args.profile, None, 0).descriptors is not None:   # the closed-form baselines (issue 42)
            if sweep.data.get("validation", {}).get("data_seed") != VALIDATION_SEED:
                value, wall, cpu = sweep.timed(lambda: tune_on_validation(args.profile))
                sweep.add("validation", value, wall, cpu)
            stored = sweep.data["untrained"][str(args.data_seed)]
            if not any(k.startswith("view_difference") for k in stored):
                value, wall, cpu = sweep.timed(lambda: closed_form(args.profile, args.data_seed,
                                                                   sweep.data["validation"]))
                sweep.add("untrained", {str(args.data_seed): {**stored, **value}}, wall, cpu)
        if _is_context(args.profile) and str(args.data_seed) not in sweep.data.get("barrier", {}):
            value, wall, cpu = sweep.timed(lambda: barrier(args.profile, args.data_seed))
            sweep.add("barrier", {**sweep.data.get("barrier", {}), str(args.data_seed): value}, wall, cpu)
        if _is_context(args.profile) and any(v in TUNED for v in args.variants):
            validation = sweep.data["validation"]
            if "frame_schedule" not in validation:
                value, wall, cpu = sweep.timed(lambda: tune_frame_schedule(args.profile, args.steps,
                                                                           args.long_steps))
                sweep.add("validation", {**validation, "frame_schedule": value}, wall, cpu)

        def train(variant: str, seed: int) -> dict:
            schedule = None
            if variant in TUNED:
                chosen = sweep.data["validation"]["frame_schedule"]
                schedule = {k: chosen[k] for k in ("dropout", "lr", "steps")}
            return run_one(args.profile, variant, seed, args.data_seed, args.steps, schedule)

        sweep.run_missing(args.variants, args.seeds, args.data_seed, train,
                          lambda row: f"TCA_f mAP={row.get('mAP', float('nan')):.4f} "
                                      f"TCA_c mAP={row['mAP_c']:.4f}")
        sweep.write()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
