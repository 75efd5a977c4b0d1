# shellcheck shell=bash
# Default runner images per GPU type (sourced by ci/run-in-container.sh).
#
# Why here: one place to bump when SGLang publishes a new image. Each must contain
# sglang >= 0.5.20 (the first release with SGLANG_EXACT_CHUNK_FILL, PR #32888; 0.5.19 is the last without).
# Release tags of lmsysorg/sglang follow <version>-rocm720-mi35x / -mi30x for ROCm. Dated
# development images (lmsysorg/sglang-rocm:<ver>-rocm720-mi35x-<date>,
# rocm/sgl-dev:<ver>-rocm720-mi35x-<date>) are chosen per run with SERVEGATE_IMAGE or the
# repository variables SERVEGATE_IMAGE_GFX95 / _GFX942 / _NVIDIA (see docs/ci.md).
# Verify a tag exists on Docker Hub before relying on it; docker fails loudly if it does not.

# shellcheck disable=SC2034  # read by the sourcing script
SG_DEFAULT_IMAGE_GFX95="lmsysorg/sglang:v0.5.23-rocm720-mi35x"
# shellcheck disable=SC2034
SG_DEFAULT_IMAGE_GFX942="lmsysorg/sglang:v0.5.23-rocm720-mi30x"
# shellcheck disable=SC2034
SG_DEFAULT_IMAGE_NVIDIA="lmsysorg/sglang:v0.5.23"
