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
    Open("iNaturalist: clients per round, the clients' test images and Worst Acc (Tables 2 and 13)",
         "The paper profile runs the federated iNaturalist of Hsu et al. (2020) one client per user of at least 16 "
         "training images (1,018 clients; 102 held out for Table 13). The paper gives no participation beyond 'a very "
         "low participation rate': we train 10 clients a round. The release's test images name no user: each "
         "client is scored on its classes' test images in the shares of its training images (our reading). Worst "
         "Acc is the minimum of the mean client accuracy over the last 250 of 500 rounds, as the paper defines it, "
         "but our engine scores every client each round rather than only the round's participants, so its minimum "
         "is likely closer to the mean than the paper's. Tables 8 and 9's iNaturalist cells are rows of this table "
         "(no table of their own, as for DomainNet); notebook 08 shows both iNaturalist tables.",
         ("paper",)),
)
