"""A synthetic "sports highlight" video with hard cuts and critical events, for Radial's detection task.

Radial loss paper, Fig. 2 and "Sports Dataset": a highlight is a chain of clips separated by hard
cuts; some clips end with a critical event (the ball flying into the net). Here each clip films a
real photo along a random camera path (:func:`hapref.data.sources.render_shot`); a third of the cuts
go to the *same* photo from another camera set-up (a "different angle", hard for colour histograms).
A critical clip ends with a fast push-in while a bright ball crosses the frame. Ground truth: the
cut frames, each clip's span, and which clips (and frames) are critical.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from hapref.data.pixels import float32_draws
from hapref.data.sources import CameraPath, render_shot

__all__ = ["HIGHLIGHT_PHOTOS", "HighlightVideo", "make_highlight_video"]

#: Scenes the highlight cuts between.
HIGHLIGHT_PHOTOS = ("grass", "astronaut", "coffee", "chelsea", "rocket", "brick", "hubble_deep_field",
                    "immunohistochemistry")


@dataclass
class HighlightVideo:
    """Frames uint8 ``[T, S, S, 3]``; clip spans ``[(start, end)]`` (end exclusive); per-clip critical flags;
    per-frame critical flags ``[T]``; ``scenes``: the photo each clip films. ``cuts`` are the first frames of
    every clip after the first, ``cut_kinds`` whether each goes to another photo or to the same photo from
    another camera set-up.

    Examples:
        >>> video = make_highlight_video(num_clips=2, clip_frames=(10, 10), critical_frames=4, size=16)
        >>> video.clips, video.cuts
        ([(0, 10), (10, 20)], [10])
    """

    frames: Tensor
    clips: list[tuple[int, int]]
    critical: list[bool]
    critical_frames: Tensor
    scenes: list[str] = field(default_factory=list)

    @property
    def cuts(self) -> list[int]:
        """The frame indices where a new clip starts, every clip but the first (the ground truth of cut detection).

        Examples:
            >>> video = make_highlight_video(num_clips=3, clip_frames=(8, 9), critical_frames=4, size=16, seed=1)
            >>> video.cuts == [start for start, _ in video.clips[1:]]
            True
            >>> is_cut = torch.zeros(video.frames.shape[0], dtype=torch.bool)  # per-frame target [T]
            >>> is_cut[video.cuts] = True
            >>> int(is_cut.sum()), bool(is_cut[0])
            (2, False)
        """
        return [start for start, _ in self.clips[1:]]

    @property
    def cut_kinds(self) -> list[str]:
        """Per cut (as :attr:`cuts`): ``"other photo"`` or ``"same photo"`` (the same photo from another camera
        set-up, the cut that colour histograms cannot see: Radial Fig. 2's "different angle").

        Examples:
            >>> video = make_highlight_video(num_clips=6, clip_frames=(8, 9), critical_frames=4, size=16, seed=3)
            >>> video.scenes
            ['coffee', 'coffee', 'coffee', 'brick', 'astronaut', 'immunohistochemistry']
            >>> video.cut_kinds
            ['same photo', 'same photo', 'other photo', 'other photo', 'other photo']
        """
        if len(self.scenes) != len(self.clips):
            raise ValueError("this HighlightVideo has no scenes (one photo name per clip); make it with "
                             "make_highlight_video")
        return ["same photo" if a == b else "other photo" for a, b in zip(self.scenes[:-1], self.scenes[1:])]


def _draw_ball(frames: Tensor, generator: torch.Generator) -> Tensor:
    """A white ball (radius ~S/12) crossing the frames on a straight line, drawn in place of the pixels."""
    t, s = frames.shape[0], frames.shape[1]
    u = torch.rand(4, generator=generator).tolist()
    # float64 positions: which pixels fall inside the ball is then the same on every CPU
    start = torch.tensor([0.1 + 0.2 * u[0], 0.2 + 0.6 * u[1]], dtype=torch.float64) * s
    end = torch.tensor([0.7 + 0.2 * u[2], 0.2 + 0.6 * u[3]], dtype=torch.float64) * s
    path = start + torch.linspace(0, 1, t, dtype=torch.float64)[:, None] * (end - start)  # [T, 2] (x, y)
    ys, xs = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
    inside = (xs[None] - path[:, 0, None, None]) ** 2 + (ys[None] - path[:, 1, None, None]) ** 2 <= (s / 12) ** 2
    out = frames.clone()
    out[inside] = 255
    return out


@float32_draws
def make_highlight_video(num_clips: int = 10, clip_frames: tuple[int, int] = (24, 36), critical_frames: int = 8,
                         critical_fraction: float = 0.5, size: int = 80, seed: int = 0) -> HighlightVideo:
    """Render one highlight video; every quantity is deterministic in ``seed``.

    Examples:
        >>> video = make_highlight_video(num_clips=3, clip_frames=(12, 14), critical_frames=4, size=16)
        >>> video.frames.dtype, len(video.clips), video.cuts == [end for _, end in video.clips[:-1]]
        (torch.uint8, 3, True)
    """
    if num_clips < 2:
        raise ValueError(f"num_clips must be >= 2, got {num_clips}")
    if not critical_frames + 4 <= clip_frames[0] <= clip_frames[1]:
        raise ValueError(f"clip_frames must be (min, max) with min >= critical_frames + 4, got {clip_frames}")
    generator = torch.Generator().manual_seed(seed)
    chunks, clips, flags, masks, scenes = [], [], [], [], []
    photo, start = None, 0
    for _ in range(num_clips):
        same_scene = photo is not None and float(torch.rand(1, generator=generator)) < 1 / 3
        if not same_scene:
            choices = [p for p in HIGHLIGHT_PHOTOS if p != photo]
            photo = choices[int(torch.randint(len(choices), (1,), generator=generator))]
        length = int(torch.randint(clip_frames[0], clip_frames[1] + 1, (1,), generator=generator))
        critical = float(torch.rand(1, generator=generator)) < critical_fraction
        path = CameraPath.random(generator)
        if critical:
            calm = render_shot(photo, path, length - critical_frames, size)
            cx, cy, view, angle = path.end
            rush = CameraPath((cx, cy, view, angle), (cx * 0.5, cy * 0.5, view * 0.55, angle))
            event = _draw_ball(render_shot(photo, rush, critical_frames, size), generator)
            frames = torch.cat([calm, event])
        else:
            frames = render_shot(photo, path, length, size)
        mask = torch.zeros(length, dtype=torch.bool)
        if critical:
            mask[-critical_frames:] = True
        chunks.append(frames)
        clips.append((start, start + length))
        flags.append(critical)
        masks.append(mask)
        scenes.append(photo)
        start += length
    return HighlightVideo(torch.cat(chunks), clips, flags, torch.cat(masks), scenes)
