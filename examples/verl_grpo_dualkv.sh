#!/usr/bin/env bash
# GRPO with veRL 0.9 on packed prompt groups: the usual main_ppo command plus ONE override,
# `actor_rollout_ref.model.external_lib=dualkv.integrations.verl`, which makes veRL's FSDP engine
# (actor update, old-log-prob and reference passes) score micro-batches packed. Everything else
# (vLLM rollout, micro-batching, shuffle, balance_batch, Ulysses SP) is configured as usual.
#
# Needs GPUs, vLLM and veRL's GSM8K parquet files (veRL's examples/data_preprocess/gsm8k.py).
# Install: the CI recipe in docs/decisions.md ("veRL and transformers"), plus vllm for the rollout.
# NOT RUN in this repository (no GPU machine with vLLM here); the engine's micro-batch path is
# tested on CPU against veRL's own (tests/python/test_integration_verl.py).
set -euo pipefail
data=${DATA:-$HOME/data/gsm8k}
model=${MODEL:-Qwen/Qwen3-0.6B}  # the smallest Qwen3; any Qwen3/Qwen2/Llama checkpoint works

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files="$data/train.parquet" \
  data.val_files="$data/test.parquet" \
  data.train_batch_size=16 \
  data.max_prompt_length=512 \
  data.max_response_length=256 \
  actor_rollout_ref.model.path="$model" \
  actor_rollout_ref.model.external_lib=dualkv.integrations.verl \
  actor_rollout_ref.actor.strategy=fsdp2 \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=5 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=6 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=6 \
  trainer.balance_batch=True \
  trainer.n_gpus_per_node="${GPUS:-1}" \
  trainer.nnodes=1 \
  trainer.total_training_steps=2 \
  trainer.logger=console \
  "$@"
# n=5 with micro-batches of 6: micro-batches split groups, which only lowers sharing.
# With ulysses_sequence_parallel_size > 1 the packed stream is sequence-sharded and attention
# runs dualkv's Ulysses all-to-all.
