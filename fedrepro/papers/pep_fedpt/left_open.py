"""What PEP-FedPT's profiles do not match in the paper's setup and tables, and why (the results
pages list these under "This profile against the paper"; :mod:`fedrepro.papers.differences`)."""
from __future__ import annotations

from ..differences import Open

LEFT_OPEN: tuple[Open, ...] = (
    Open("iNaturalist (Table 2's and Table 13's iNat columns, Tables 8 and 9)",
         "The paper's federated iNaturalist (Hsu et al. 2020: 1,018 clients of at least 16 training images, "
         "1,203 classes, 500 rounds of E = 2) needs that per-user split and a loader that reads it and "
         "partitions by user; neither is written yet, so no profile runs these columns.", ("laptop", "paper")),
)
