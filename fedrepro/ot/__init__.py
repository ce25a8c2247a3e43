"""Optimal transport: the batched (unbalanced) Sinkhorn solver that FedOTP and its analyses use."""
