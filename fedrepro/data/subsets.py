"""Named class subsets of real datasets that the papers train on (the ``classes`` option of the
image-folder loaders)."""
from __future__ import annotations

# DomainNet's ten classes that pFedPG (Yang et al., ICCV 2023) and FedBN (Li et al., ICLR 2021) train
# on, "the top ten most frequent classes" (PEP-FedPT §5.1); FedOTP App. B.1 also trains on 10.
DOMAINNET_TEN = ("bird", "feather", "headphones", "ice_cream", "teapot", "tiger", "whale", "windmill", "wine_glass",
                 "zebra")

__all__ = ["DOMAINNET_TEN"]
