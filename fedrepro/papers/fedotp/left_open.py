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
         "keeps). The laptop runs each trained method at the rate a search on validation data picks "
         "(fedrepro.papers.fedotp.tables.lr_search), the same search for every method: 3 tuning seeds, 120 "
         "validation images at 4 shots; a rate within noise of the best goes to the rule (0.001 if it is among "
         "them, else the median), and each row's margin is shown beside its rate.", ("laptop",)),
    Open("Local CoOp's budget",
         "The official code trains local CoOp once, for 10 epochs, against FedOTP's 10 rounds × 5 epochs. The CoOp "
         "row and its claims run that budget; a second row, CoOp at the equal budget (ours), trains its prompt "
         "every round as the federated methods do (125 epochs at laptop), with its claims marked (ours).",
         ("laptop", "paper")),
    Open("pFedPrompt's personalised module",
         "We have not read pFedPrompt's code: its row is our reading, a Tip-Adapter cache of the client's few "
         "shots, weighed α·scale/100 against the text logits (Tip-Adapter sets α at CLIP's scale of 100; the "
         "stand-in's is about 15). The unscaled cache is shown beside it.", ("laptop", "paper")),
    Open("CoOp's few-shot splits",
         "The image-folder loader holds out a seeded fraction of each class as the test split rather than reading "
         "CoOp's split files, and draws the few-shot training images from the rest.", ("paper",)),
    Open("Table 1's class blocks",
         "The official split gives each of the 10 clients a block of classes and the last client the rest; our "
         "pathological partitioner gives every client the same number, so where 10 blocks exceed the classes a few "
         "classes are shared (fedrepro.papers.fedotp.setup).", ("paper",)),
)
