#!/usr/bin/env python3
"""check_report.py REPORT.json MIN_ACCURACY: the report of `train` has every
documented key, sane values, and a test accuracy of at least MIN_ACCURACY."""
import json
import sys

report = json.load(open(sys.argv[1]))
keys = ["network", "command", "epochs", "train_loss", "test_loss", "test_accuracy",
        "images_per_second", "seconds", "parameters", "peak_memory_bytes"]
missing = [k for k in keys if k not in report]
assert not missing, f"missing keys: {missing}"
assert 0 < report["train_loss"] < 10 and 0 < report["test_loss"] < 10, report
assert report["images_per_second"] > 0 and report["seconds"] > 0, report
assert report["peak_memory_bytes"] > 0, report
acc = report["test_accuracy"]
print(f"test accuracy {acc:.4f}")
assert acc >= float(sys.argv[2]), f"test accuracy {acc} is below {sys.argv[2]}"
print("report ok")
