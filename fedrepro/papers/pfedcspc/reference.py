"""pFedCSPC's reported numbers, quoted from pFedCSPC (TNNLS) Tables II-VII, accuracy in %,
"mean±std" as printed. Table II's HM is as printed: three cells (FedSoup Tiny and Vireo, GRACE
CIFAR-100) disagree with HM = 2GL/(G+L) of Eq. 21.
Row keys are our method names; ablation rows use the names of
:data:`fedrepro.methods.pfedcspc.ABLATION_GLOBAL` / ``ABLATION_PERSONAL``.
"""

TABLES = {
    "T2": {
        "source": "pFedCSPC Table II: Global (ACC_global), Local (I_local, global methods fine-tuned locally) "
                  "and HM; β = 0.5, 10 clients, 3 trials",
        "columns": ["C10 Global", "C10 Local", "C10 HM", "C100 Global", "C100 Local", "C100 HM",
                    "Tiny Global", "Tiny Local", "Tiny HM", "Vireo Global", "Vireo Local", "Vireo HM"],
        "rows": {
            "fedavg": "66.78±0.4|64.13±0.7|65.43±0.5|66.54±0.3|63.15±0.6|64.80±0.4|45.38±0.4|41.32±1.0|43.25±0.6|59.88±0.8|54.21±0.6|56.89±0.7",
            "moon": "69.04±0.7|63.49±0.5|66.14±0.6|67.88±0.4|64.79±0.7|66.29±0.6|47.31±0.9|42.48±0.7|44.76±0.8|61.25±1.1|54.65±0.6|57.76±0.8",
            "feddc": "69.13±0.6|63.23±0.7|66.05±0.6|67.75±0.6|64.51±0.6|66.09±0.6|46.81±0.2|39.63±0.5|42.92±0.3|60.97±0.5|53.63±0.8|57.06±0.6",
            "fedntd": "68.89±0.3|61.75±0.7|65.12±0.4|67.83±0.2|62.59±0.7|65.10±0.5|45.79±0.5|40.18±0.3|42.80±0.4|60.88±0.9|51.19±0.8|55.62±0.8",
            "fedasam": "68.48±0.6|64.63±1.0|66.50±0.8|67.71±0.5|63.37±0.8|65.47±0.7|47.38±0.6|42.78±0.5|44.96±0.5|61.14±0.2|52.87±0.7|56.71±0.3",
            "fedproc": "69.18±1.2|65.57±1.1|67.32±1.1|67.63±0.7|64.49±0.5|66.02±0.6|47.21±0.4|42.98±0.6|44.99±0.5|60.46±0.4|54.72±0.5|57.45±0.4",
            "feddecorr": "68.66±0.8|65.81±0.6|67.20±0.7|67.79±0.6|65.21±0.9|66.47±0.8|46.21±0.7|41.83±0.5|43.91±0.6|61.06±0.7|53.65±0.9|57.11±0.8",
            "ccvr": "68.56±0.7|63.54±0.8|65.95±1.1|67.86±0.4|62.35±0.6|64.99±0.5|46.11±0.4|39.76±0.3|42.70±0.3|60.87±0.3|51.98±0.6|56.07±0.4",
            "fedsoup": "68.74±0.6|66.37±0.9|67.53±0.6|67.36±0.7|65.51±0.6|66.42±0.6|47.81±0.4|45.48±0.3|45.08±0.3|61.36±0.3|56.82±0.4|58.46±0.4",
            "grace": "69.21±0.7|67.86±0.5|68.52±0.6|67.14±0.7|66.22±0.7|65.90±0.5|47.36±1.1|45.58±0.7|46.45±0.8|60.61±0.3|57.13±0.8|58.81±0.5",
            "fedetf": "70.84±0.8|68.43±0.7|69.61±0.8|68.67±0.7|65.32±0.4|66.95±0.5|47.51±0.5|44.32±0.6|45.85±0.5|61.27±0.3|57.56±0.5|59.36±0.4",
            "pfedcspc": "70.81±0.7|69.81±0.5|70.31±0.6|68.39±0.4|65.28±0.6|66.80±0.5|47.87±0.6|45.27±0.4|46.53±0.5|62.19±0.6|57.89±0.6|59.96±0.6",
        },
    },
    "T3": {
        "source": "pFedCSPC Table III: personalised performance I_local, β = 0.5, 3 trials",
        "columns": ["CIFAR10", "CIFAR100", "TinyImagenet", "VireoFood172"],
        "rows": {
            "fedavg": "63.17±1.3|61.03±0.8|38.07±0.9|49.08±1.0",
            "fedavg_ft": "64.13±0.7|63.15±0.6|41.32±1.0|54.21±0.6",
            "lgfed": "58.92±0.3|60.38±0.5|40.76±0.5|53.25±0.8",
            "fedperpp": "62.82±0.8|62.17±1.1|41.89±0.6|55.23±1.1",
            "ditto": "66.28±0.9|64.26±0.5|42.62±0.8|54.14±0.7",
            "fedfomo": "67.78±1.2|64.69±0.9|43.22±0.7|55.34±0.7",
            "fedala": "67.14±0.4|63.53±0.7|43.74±0.9|56.46±0.5",
            "pfedcspc": "69.81±0.5|65.28±0.6|45.27±0.4|57.89±0.6",
        },
    },
    "T4": {
        "source": "pFedCSPC Table IV: ablation, ACC_global, β = 0.5, C = sample fraction",
        "index": "setting",
        "columns": ["C10 C=0.5", "C10 C=1.0", "C100 C=0.5", "C100 C=1.0"],
        "rows": {
            "Base": "65.71±0.6|66.78±0.4|65.01±0.7|66.54±0.3",
            "+TPG+CA": "63.49±0.7|64.32±0.5|62.37±0.5|64.68±0.5",
            "+CPM+CA": "67.66±0.2|68.89±0.3|66.32±0.4|67.35±0.3",
            "+PTA+CPM+CA": "68.14±0.6|69.51±0.4|67.04±0.1|68.02±0.7",
            "+PTA+CPM+CA+KP": "68.69±0.6|69.94±0.4|67.18±0.4|68.14±0.3",
            "+TPG+PA+CA": "64.84±0.3|66.19±0.6|61.79±0.6|65.74±0.2",
            "+CPM+PA+CA": "68.64±0.4|69.66±0.2|66.77±0.3|67.77±0.4",
            "+PTA+CPM+PA+CA": "69.01±0.6|70.42±0.4|67.24±0.1|68.21±0.7",
            "+PTA+CPM+PA+CA+KP": "69.47±0.3|70.81±0.4|67.36±0.5|68.39±0.4",
        },
    },
    "T5": {
        "source": "pFedCSPC Table V: ablation, I_local, β = 0.5, C = 1.0",
        "index": "setting",
        "columns": ["CIFAR10", "CIFAR100"],
        "rows": {
            "FedAvg": "63.17±1.3|59.03±1.1",
            "FedAvg+FT_CE": "64.31±0.7|60.32±0.8",
            "FedAvg+PMI+FT_CE": "65.12±0.5|61.43±0.4",
            "FedAvg+PMI+FT_CE+Align": "66.74±0.4|63.03±0.8",
            "FedCSPC": "65.63±1.1|62.18±1.0",
            "FedCSPC+FT_CE": "66.98±0.4|63.47±0.4",
            "FedCSPC+PMI+FT_CE": "68.02±0.8|64.13±0.7",
            "FedCSPC+PMI+FT_CE+Align": "69.81±0.5|65.28±0.6",
        },
    },
    "T6": {
        "source": "pFedCSPC Table VI: orthogonality, ACC_global, β = 0.5",
        "columns": ["CIFAR10", "TinyImagenet"],
        "rows": {
            "fedprox": "67.55±0.6|46.59±0.7",
            "fedprox+pfedcspc": "69.46±0.5|47.68±0.4",
            "moon": "69.04±0.7|47.31±0.9",
            "moon+pfedcspc": "71.42±0.4|48.46±0.5",
            "fedasam": "68.48±0.6|47.38±0.6",
            "fedasam+pfedcspc": "70.65±0.5|48.62±0.3",
        },
    },
    "T7": {
        "source": "pFedCSPC Table VII: rounds to a target global test accuracy (C10: 61% at β=0.1, 66% at β=0.5; "
                  "Tiny: 42% at β=0.1, 45% at β=0.5)",
        "columns": ["C10 β=0.1", "C10 β=0.5", "Tiny β=0.1", "Tiny β=0.5"],
        "rows": {
            "fedavg": "88|82|89|85",
            "fedprox": "77|67|85|71",
            "moon": "54|32|62|48",
            "feddc": "58|34|68|49",
            "fedntd": "76|54|69|42",
            "fedasam": "60|34|72|39",
            "fedproc": "62|36|55|46",
            "feddecorr": "72|41|61|58",
            "ccvr": "68|48|74|57",
            "pfedcspc": "41|24|44|33",
        },
    },
}

# pFedCSPC (TNNLS) Table VII's targets (global test accuracy, as a fraction), keyed by its columns: the
# caption's 61% / 66% on CIFAR-10 and 42% / 45% on Tiny-ImageNet at β = 0.1 / 0.5.
TABLE_VII_TARGETS = {"C10 β=0.1": 0.61, "C10 β=0.5": 0.66, "Tiny β=0.1": 0.42, "Tiny β=0.5": 0.45}

# pFedCSPC (TNNLS) Table I, keyed by our dataset names: classes, training and test images.
TABLE_I = {
    "cifar10": {"classes": 10, "train": 50000, "test": 10000},
    "cifar100": {"classes": 100, "train": 50000, "test": 10000},
    "tiny_imagenet": {"classes": 200, "train": 100000, "test": 10000},
    "vireo172": {"classes": 172, "train": 68175, "test": 33154},
}
