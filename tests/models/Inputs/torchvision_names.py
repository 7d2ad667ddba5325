#!/usr/bin/env python3
"""torchvision_names.py: the names of the model zoo's parameters in dlc
(models/*.dl) and in torchvision's state_dicts, each from the other
(docs/models.md).

A dlc name is torchvision's key, component by component, with two rewritings:

  * an index into an nn.Sequential follows its container after an
    underscore: features.0.weight is features_0.weight,
    inception4a.branch2.1.conv.weight is inception4a.branch2_1.conv.weight,
    layer2.0.downsample.1.running_var is layer2.downsample_1.running_var;
  * ResNet's stages (layer1 ... layer4) are made by a repeat, whose blocks
    take dlc's automatic names: the first is layerS, the k-th (k >= 2)
    layerS_k, so torchvision's layerS.i is layerS for i = 0 and layerS_{i+1}
    after.

torchvision's batchnorm counters (num_batches_tracked) have no dlc
counterpart and are left out; dlc's optimizer state (P.momentum_buffer) has
no torchvision counterpart.

  torchvision_names.py to-dlc KEY...     prints each KEY's dlc name
  torchvision_names.py to-torch NAME...  prints each NAME's torchvision key
  (or "NAME: no counterpart")
"""
import re
import sys

STAGE = re.compile(r"layer\d+")          # ResNet's stages
INDEXED = re.compile(r"([A-Za-z]\w*?)_(\d+)")  # container_index


def torch_to_dlc(key):
    """torchvision's state_dict key -> dlc's parameter name, or None for a
    tensor dlc does not have (num_batches_tracked)."""
    if key.endswith(".num_batches_tracked"):
        return None
    parts, out, i = key.split("."), [], 0
    while i < len(parts):
        part = parts[i]
        if i + 1 < len(parts) and parts[i + 1].isdigit():
            k = int(parts[i + 1])
            if STAGE.fullmatch(part):
                out.append(part if k == 0 else f"{part}_{k + 1}")
            else:
                out.append(f"{part}_{k}")
            i += 2
        else:
            out.append(part)
            i += 1
    return ".".join(out)


def dlc_to_torch(name):
    """dlc's parameter name -> torchvision's state_dict key, or None for a
    tensor torchvision does not have (optimizer state)."""
    if name.endswith((".momentum_buffer", ".exp_avg", ".exp_avg_sq")):
        return None
    out = []
    for part in name.split("."):
        m = re.fullmatch(r"(layer\d+)(?:_(\d+))?", part)
        if m:
            out += [m[1], str(int(m[2]) - 1 if m[2] else 0)]
            continue
        m = INDEXED.fullmatch(part)
        if m:
            out += [m[1], m[2]]
            continue
        out.append(part)
    return ".".join(out)


def state_dict_to_dlc(state_dict):
    """A torchvision state_dict as dlc's tensors (a dict), ready for a
    safetensors file that a compiled model loads."""
    tensors = {}
    for key, value in state_dict.items():
        name = torch_to_dlc(key)
        if name is not None:
            assert dlc_to_torch(name) == key, f"{key} -> {name} does not map back"
            tensors[name] = value
    return tensors


def dlc_to_state_dict(tensors):
    """dlc's tensors (a dict, e.g. read from a checkpoint) as a torchvision
    state_dict: load it with model.load_state_dict(sd, strict=False), which
    keeps the model's own num_batches_tracked counters."""
    return {dlc_to_torch(k): v for k, v in tensors.items() if dlc_to_torch(k) is not None}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("to-dlc", "to-torch"):
        sys.exit(__doc__)
    convert = torch_to_dlc if sys.argv[1] == "to-dlc" else dlc_to_torch
    for arg in sys.argv[2:]:
        name = convert(arg)
        print(name if name is not None else f"{arg}: no counterpart")
