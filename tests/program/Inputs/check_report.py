#!/usr/bin/env python3
"""check_report.py REPORT.json [MIN_ACCURACY]: the --report of any command
has the keys docs/program.md documents for that command, with sane values;
given MIN_ACCURACY, a test accuracy of at least that."""
import json
import sys

report = json.load(open(sys.argv[1]))
common = ["network", "device", "command", "threads", "batch", "seconds", "parameters",
          "peak_memory_bytes", "activation_bytes", "activation_naive_bytes",
          "activation_lower_bound_bytes", "peak_rss_bytes"]
keys = {
    "train": ["epochs", "images", "train_loss", "test_loss", "test_accuracy",
              "images_per_second"],
    "eval": ["images", "test_loss", "test_accuracy", "images_per_second"],
    "predict": ["images", "images_per_second"],
    "bench": ["mode", "images", "images_per_second", "median_ms", "mean_ms", "min_ms",
              "max_ms"],
    "gradcheck": ["train_loss", "gradcheck_error", "gradcheck_f32_error"],
    "check": ["check_worst_error", "check_worst_tensor"],
    "info": [],
}[report["command"]]
missing = [k for k in common + keys if k not in report]
assert not missing, f"missing keys: {missing}"
extra = [k for k in report if k not in common + keys]
assert not extra, f"undocumented keys for {report['command']}: {extra}"
assert report["seconds"] >= 0 and report["parameters"] > 0, report
assert report["peak_memory_bytes"] > 0 and report["peak_rss_bytes"] > 0, report
assert (0 < report["activation_lower_bound_bytes"] <= report["activation_bytes"]
        <= report["activation_naive_bytes"]), report
assert report["activation_bytes"] < report["peak_memory_bytes"], report
assert report["threads"] >= 1 and report["batch"] >= 1, report
if "images" in keys:
    assert report["images"] > 0 and report["images_per_second"] > 0, report
for k in ("train_loss", "test_loss"):
    if k in keys:
        assert 0 < report[k] < 10, report
if "test_accuracy" in keys:
    acc = report["test_accuracy"]
    assert 0 <= acc <= 1, report
    print(f"test accuracy {acc:.4f}")
    if len(sys.argv) > 2:
        assert acc >= float(sys.argv[2]), f"test accuracy {acc} is below {sys.argv[2]}"
if "gradcheck_error" in keys:
    assert 0 <= report["gradcheck_error"] < 1e-3, report
    assert 0 <= report["gradcheck_f32_error"] < 1e-3, report
assert report["device"] in ("cpu", "cuda"), report
if "median_ms" in keys:
    assert 0 < report["min_ms"] <= report["median_ms"] <= report["max_ms"], report
    assert report["min_ms"] <= report["mean_ms"] <= report["max_ms"], report
print("report ok")
