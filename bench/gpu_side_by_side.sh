#!/bin/sh
# GPU marching cubes beside HP5, in one device call: builds and runs the
# peers (a copy of ../shared/peers/gpu carried as PEERS, default .peers/gpu),
# then bench_cuda_isosurface with HP5's figures from that run.
#   bench/gpu_side_by_side.sh BUILD OUTDIR [SIZES]
# OUTDIR gets peers.txt (HP5, NVIDIA's sample, CUB) and pyramesh.txt.
set -eu
BUILD=$1
OUT=$2
SIZES=${3:-128,192,256,384,512,640,768,1024}
PEERS=${PEERS:-.peers/gpu}
mkdir -p "$OUT"
ARCH=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
bash "$PEERS/run.sh" "$SIZES" "$ARCH" >"$OUT/peers.txt" 2>&1 || true
PM_BENCH_HP5="$OUT/peers.txt" "$BUILD/bench/bench_cuda_isosurface" 1024 128 "$SIZES" >"$OUT/pyramesh.txt" 2>&1
