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
         "in a laptop budget. The laptop searches every row's head rate and then its prompt rate on validation data "
         "(fedrepro.papers.pep_fedpt.tables.lr_search). P-PT also runs unsearched at the paper's one rate, the row "
         "\"p_pt (paper's rate)\" beside \"p_pt (ours, tuned)\": the paper's P-PT (75.37, below FedVPT) looks "
         "under-trained at that rate, so the claims against P-PT read the paper's-rate row and the tuned one is "
         "read by claims marked (ours).", ("laptop",)),
    Open("CCMP at layers 1-3, 5-7 and 8-10 of ViT-B/16 (Table 12)",
         "The stand-in has 6 blocks, on which three-block arms at the paper's relative positions overlap (first "
         "[0, 1, 2], middle [2, 3, 4], late [3, 4, 5], 0-indexed) and the middle arm's last block acts through 2 "
         "of 6 blocks, the paper's late geometry. The laptop's Table 12 arms are one CCMP block each, the last "
         "block of the paper's arm at the same relative depth: 1, 3 and 4 (our reading, "
         "fedrepro.methods.pep_fedpt.single_ccmp_block). The default PEP-FedPT keeps three blocks, [2, 3, 4].",
         ("laptop",)),
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
