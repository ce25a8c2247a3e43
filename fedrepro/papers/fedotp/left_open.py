"""What FedOTP's profiles do not match in the paper's setup and tables, and why (the results pages
list these under "This profile against the paper"; :mod:`fedrepro.papers.differences`). The paper
profile's mismatches item by item are generated from :mod:`.paper_lines` and join these on the
pages; they are not typed here."""
from __future__ import annotations

from ..differences import Open

LEFT_OPEN: tuple[Open, ...] = (
    Open("CLIP (RN50, ViT-B/16) on the CLIP datasets, CIFAR, DomainNet and Office-Caltech10",
         "The laptop profile runs offline: a small CLIP we pretrained stands in for CLIP, and Fashion-MNIST images "
         "it never saw, drawn in styles, stand in for the datasets (fedrepro.papers.fedotp.setup gives the values "
         "and why). The paper's datasets run only at the paper profile, from the data root.", ("laptop",)),
    Open("One learning rate for every method",
         "The paper's rate is lost in our copy of the text (the official code's is 0.001, which the paper profile "
         "keeps). The laptop runs each trained method at its best rate of a search on validation data "
         "(fedrepro.papers.fedotp.tables.lr_search), the same search for every method.", ("laptop",)),
    Open("CoOp's few-shot splits",
         "The image-folder loader holds out a seeded fraction of each class as the test split rather than reading "
         "CoOp's split files, and draws the few-shot training images from the rest.", ("paper",)),
    Open("Table 1's class blocks",
         "The official split gives each of the 10 clients a block of classes and the last client the rest; our "
         "pathological partitioner gives every client the same number, so where 10 blocks exceed the classes a few "
         "classes are shared (fedrepro.papers.fedotp.setup).", ("paper",)),
)
