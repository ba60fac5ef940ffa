"""Training for every pipeline of the book: one generic loop plus one module per pipeline.

``fit(task, TrainConfig(...))`` trains any :class:`Task`; ``python -m hapref.train <pipeline>``
runs a registered pipeline (see :data:`PIPELINES`) at a named profile.
"""

from hapref.train.loop import Task, TrainConfig, TrainResult, fit, load_checkpoint, lr_factor
from hapref.train.registry import PIPELINES, load_pipeline

__all__ = ["PIPELINES", "Task", "TrainConfig", "TrainResult", "fit", "load_checkpoint", "load_pipeline",
           "lr_factor"]
