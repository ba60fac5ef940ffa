"""Issue 44 item 3: what a training run tells the person watching it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from hapref.plotting.training import plot_history  # noqa: E402


def test_plot_history_saved_png_keeps_its_axis_labels(tmp_path):
    ax = plot_history({"run": [{"step": s, "loss": 1 / s} for s in range(1, 50)]})
    path = tmp_path / "curves.png"
    ax.figure.savefig(path)                  # a plain savefig, no bbox_inches="tight"
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    figure_box = fig.bbox
    for label in (ax.xaxis.label, ax.yaxis.label):
        box = label.get_window_extent(renderer)
        assert label.get_text() and box.y0 >= figure_box.y0 - 0.5 and box.x0 >= figure_box.x0 - 0.5, label
        assert box.y1 <= figure_box.y1 + 0.5 and box.x1 <= figure_box.x1 + 0.5, label
    assert path.stat().st_size > 0
    plt.close(fig)


def test_train_cli_default_folder_eval_lines_and_resume_step(tmp_path, monkeypatch, capsys):
    """Without --out the run is saved in $HAPREF_RUNS/<pipeline>-<profile>-<time>, named at the start and before
    the summary line; --no-progress still prints one line per evaluation; --resume says from which step."""
    from hapref.train.__main__ import main
    monkeypatch.setenv("HAPREF_RUNS", str(tmp_path / "runs"))
    assert main(["tca", "--profile", "smoke", "--steps", "4", "--set", "eval_every=2", "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    folders = list((tmp_path / "runs").iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("tca-smoke-")
    assert {"config.json", "checkpoint.pt", "log.jsonl", "metrics.json", "curves.png"} <= \
        {p.name for p in folders[0].iterdir()}
    end = [i for i, line in enumerate(lines) if line.startswith(f"run folder: {folders[0]} (")]
    assert lines[0] == f"run folder: {folders[0]}" and len(end) == 1
    assert lines[-1].startswith("eval:") and all(line.startswith(("mAP", "eval:")) for line in lines[end[0] + 1:])
    evals = [line for line in lines if line.startswith("step ")]
    assert [line.split(":")[0] for line in evals] == ["step 2/4", "step 4/4"] and "mAP=" in evals[0]
    assert main(["tca", "--profile", "smoke", "--steps", "4", "--set", "eval_every=2", "--no-progress",
                 "--out", str(folders[0]), "--resume"]) == 0
    assert f"resuming {folders[0]} at step 4 of 4" in capsys.readouterr().out


class _Toy:
    """A least-squares task with one evaluated metric."""

    def build_model(self):
        import torch
        return torch.nn.Linear(4, 1)

    def batch(self, step, device):
        import torch
        return torch.randn(8, 4, generator=torch.Generator().manual_seed(step)).to(device)

    def loss(self, model, batch):
        return {"loss": (model(batch)[:, 0] - batch.sum(1)).pow(2).mean()}

    def evaluate(self, model):
        return {"mse": float(self.loss(model, self.batch(-1, "cpu"))["loss"])}


def test_tensorboard_scalars_and_a_callback_at_each_evaluation(tmp_path):
    """fit(tensorboard=True) writes the loss, lr and evaluated metrics as TensorBoard scalars at their steps;
    on_evaluate sees the history after every evaluation (the CLI redraws curves.png there)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from hapref.train import TrainConfig, fit

    seen = []
    fit(_Toy(), TrainConfig(steps=6, eval_every=2, lr=1e-2), tmp_path, progress=False, tensorboard=True,
        on_evaluate=lambda history, metrics: seen.append((history[-1]["step"], sorted(metrics))))
    assert seen == [(2, ["mse"]), (4, ["mse"]), (6, ["mse"])]
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert {"loss", "lr", "mse"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("loss")] == [1, 2, 3, 4, 5, 6]
    assert [e.step for e in events.Scalars("mse")] == [2, 4, 6]


def test_train_cli_writes_tensorboard_and_curves(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "run"
    env = {**__import__("os").environ, "HAPREF_DATA": str(tmp_path / "data")}
    text = subprocess.run([sys.executable, "-m", "hapref.train", "radial", "--profile", "smoke", "--out", str(out),
                           "--no-progress"], capture_output=True, text=True, check=True, env=env).stdout
    assert (out / "curves.png").stat().st_size > 0
    assert any(p.name.startswith("events.out.tfevents") for p in (out / "tensorboard").iterdir())
    assert "tensorboard/" in text
