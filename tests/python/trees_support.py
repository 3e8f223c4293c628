"""Multi-turn, branching trajectories for the tree tests: a tiny agentic batch whose trajectories
share prompts and turns, branch after their second turn and part mid-turn."""

import random

from models_support import VOCAB

from dualkv import Turn
from dualkv.training import TrajectoryGroup


def _tokens(rng, n):
    return [rng.randrange(1, VOCAB) for _ in range(n)]


def agentic_trajectories(seed):
    """Four trajectories of one task: a shared prompt, a first answer shared by all, tool outputs
    that differ, answers that branch in pairs after the second turn and part mid-turn, one
    trajectory a prefix of another; then a second task's two trajectories. The tasks start with
    tokens 1 and 2."""
    rng = random.Random(seed)
    prompt, answer, tool = [1, *_tokens(rng, 8)], _tokens(rng, 4), _tokens(rng, 3)
    branch_a, branch_b, tool_b = _tokens(rng, 5), _tokens(rng, 2), _tokens(rng, 4)
    shared_start = _tokens(rng, 2)
    trajectories = [
        [Turn(prompt, False), Turn(answer, True), Turn(tool, False), Turn(branch_a, True)],
        [Turn(prompt, False), Turn(answer, True), Turn(tool, False), Turn(branch_a, True), Turn(_tokens(rng, 3), False),
         Turn(_tokens(rng, 1), True)],
        [(prompt, False), (answer, True), (tool, False), (branch_b, True), (tool_b, False),
         (shared_start + _tokens(rng, 3), True)],
        [(prompt, False), (answer, True), (tool, False), (branch_b, True), (tool_b, False),
         (shared_start + _tokens(rng, 1), True)],
    ]
    other = [2, *_tokens(rng, 5)]
    trajectories += [
        [Turn(other, False), Turn(_tokens(rng, 3), True)],
        [Turn(other, False), Turn(_tokens(rng, 5), True), Turn(_tokens(rng, 2), False), Turn(_tokens(rng, 2), True)],
    ]
    return trajectories


def flat(trajectory):
    tokens, trained = [], []
    for ids, is_trained in trajectory:
        tokens += list(ids)
        trained += [is_trained] * len(ids)
    return tokens, trained


def trajectory_groups(seed):
    """TrajectoryGroups for the policy update: the agentic batch's two tasks as two groups with a
    reward per trajectory, then a third task of one trajectory. Every task starts with its own
    token, so each is a tree of its own."""
    trajectories = agentic_trajectories(seed)
    rng = random.Random(seed + 100)
    third = [[Turn([3, *(rng.randrange(1, VOCAB) for _ in range(4))], False), Turn([7, 8, 9], True)]]
    groups = [trajectories[:4], trajectories[4:], third]
    return [TrajectoryGroup(tuple(map(tuple, g)), tuple(rng.random() for _ in g)) for g in groups]
