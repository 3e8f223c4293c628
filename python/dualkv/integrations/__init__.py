"""Trainer integrations: `dualkv.integrations.trl` (a GRPOTrainer subclass, `pip install dualkv[trl]`)
and `dualkv.integrations.verl` (a veRL FSDP engine plugin, `pip install dualkv[verl]`). Each is
imported on its own, so neither trainer library is needed to use the other."""
