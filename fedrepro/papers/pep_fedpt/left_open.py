"""What PEP-FedPT's profiles do not match in the paper's setup and tables, and why (the results
pages list these under "This profile against the paper"; :mod:`fedrepro.papers.differences`). The
paper profile's mismatches item by item are generated from :mod:`.paper_lines` and join these on the
pages; they are not typed here."""
from __future__ import annotations

from ..differences import Open

LEFT_OPEN: tuple[Open, ...] = (
    Open("ViT-B/16 (ImageNet-21K) on CIFAR-100, Tiny-ImageNet, DomainNet and iNaturalist",
         "The laptop profile runs offline: a small ViT we pretrained on glyphs stands in for ViT-B/16, and the "
         "Fashion-MNIST images it never saw stand in for the datasets, with fewer clients and rounds "
         "(fedrepro.papers.pep_fedpt.setup gives the values and why). The paper's datasets run only at the paper "
         "profile, from the data root.", ("laptop",)),
    Open("One learning rate of 0.1 for the prompts and the head (App. A.3.2)",
         "On the stand-in one inserted token moves the class token little, so at one rate the prompts barely train "
         "in a laptop budget. The laptop trains the head at the setup's rate and picks the prompts' rate for FedVPT "
         "and PEP-FedPT by a search on validation data (fedrepro.papers.pep_fedpt.tables.prompt_lr_search); the "
         "other baselines keep the setup's values, untuned.", ("laptop",)),
    Open("iNaturalist (Table 2's and Table 13's iNat columns, Tables 8 and 9)",
         "The paper's federated iNaturalist (Hsu et al. 2020: 1,018 clients of at least 16 training images, "
         "1,203 classes, 500 rounds of E = 2) needs that per-user split and a loader that reads it and "
         "partitions by user; neither is written yet, so no profile runs these columns.", ("laptop", "paper")),
)
