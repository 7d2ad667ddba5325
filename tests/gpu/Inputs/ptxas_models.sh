#!/bin/sh
# ptxas_models.sh DLC PTXAS MODELS OUT: each model's PTX for sm_80 and
# sm_90, assembled by ptxas; prints "NAME ok" for each (ptx_models.test).
set -e
dlc=$1 ptxas=$2 models=$3 out=$4
for m in lenet5 mlp simplecnn alexnet caffe_alexnet vgg16 googlenet resnet18 resnet50; do
    for arch in sm_80 sm_90; do
        $dlc "$models/$m.dl" --emit=ptx --gpu-arch=$arch -o "$out/$m.$arch.ptx"
        "$ptxas" -arch=$arch "$out/$m.$arch.ptx" -o "$out/$m.$arch.cubin"
    done
    echo "$m ok"
done
