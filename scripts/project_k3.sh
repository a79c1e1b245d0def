#!/bin/sh
# project_k3.sh — issue 5's headline projection: Kimi K3 (93 layers, 896 experts, 16 active,
# MXFP4 experts, Q4_K dense) on (a) a 24 GiB and (b) a 64 GiB machine, projected from a
# per-layer measurement on a random model with K3's real layer geometry
# (docs/kimi-k3-projection.md). The method and the options are scripts/project_model.sh's
# (MODEL=k3: a 3-layer K3 of layers KKM, N_LAYER / LAYERS to change it).
# usage: scripts/project_k3.sh [--record]
DIR=${DIR:-/tmp/dfk3} MODEL=k3 exec sh "$(dirname "$0")/project_model.sh" "$@"
