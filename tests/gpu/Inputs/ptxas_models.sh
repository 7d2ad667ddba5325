#!/bin/sh
# ptxas_models.sh DLC PTXAS MODELS OUT [FILE.dl...]: each model's PTX (the
# zoo's, or the files named) for sm_80 and sm_90, and for sm_90 in TF32
# too (--gpu-math=tf32, the tensor cores), assembled by ptxas; prints
# "NAME ok" for each (ptx_models.test).  VARIANTS="sm_90:f32 ..." chooses
# other architectures and math.
set -e
dlc=$1 ptxas=$2 models=$3 out=$4
shift 4
if [ $# -eq 0 ]; then
    for m in lenet5 mlp simplecnn alexnet caffe_alexnet vgg16 googlenet resnet18 resnet50 \
             lstm_fashion gru_fashion charlm; do
        set -- "$@" "$models/$m.dl"
    done
fi
for file in "$@"; do
    m=$(basename "$file" .dl)
    for variant in ${VARIANTS:-sm_80:f32 sm_90:f32 sm_90:tf32}; do
        arch=${variant%:*} math=${variant#*:}
        $dlc "$file" --emit=ptx --gpu-arch=$arch --gpu-math=$math -o "$out/$m.$arch.$math.ptx"
        "$ptxas" -arch=$arch "$out/$m.$arch.$math.ptx" -o "$out/$m.$arch.$math.cubin"
    done
    echo "$m ok"
done
