"""FedPFT's reported numbers, quoted from the ICLR and arXiv versions' tables (each table's
``source`` names both numbers). "FedPFT" = no contrastive task (ICLR "FedPFT", arXiv "FedPFT w/o
L_Con"), "FedPFT+Con" = with it (ICLR "FedPFT+Con", arXiv "FedPFT"); every number the two versions
share is identical under this mapping. Cells are ``"mean±std"`` as printed.
"""

TABLES = {
    "T1": {
        "source": "FedPFT T1 (both versions): Probe / Origin / Match accuracy, CIFAR-10, Dirichlet, 40 clients, "
                  "ResNet-8",
        "columns": ["α=0.5 Probe", "α=0.5 Origin", "α=0.5 Match", "α=1.0 Probe", "α=1.0 Origin", "α=1.0 Match"],
        "rows": {
            "fedavg": "72.52|59.66|72.60|68.38|60.33|68.37",
            "fedper": "71.07|68.86|71.03|66.51|64.83|66.75",
            "fedbn": "70.15|66.20|70.60|66.51|62.97|66.80",
            "fedcac": "71.56|68.71|71.63|66.98|64.90|67.11",
            "fedpft": "72.59|72.66|72.73|69.57|69.25|69.30",
            "fedpft_con": "77.25|77.06|77.68|74.02|73.88|74.75",
        },
    },
    "T-C10": {
        "source": "FedPFT ICLR T8 / arXiv T7: Dirichlet CIFAR-10, ResNet-8, 40 clients, best-round mean accuracy",
        "columns": ["α=0.1", "α=0.5", "α=1.0"],
        "rows": {
            "fedavg": "60.39±1.46|60.41±1.36|60.91±0.72",
            "local": "81.91±3.09|60.15±0.86|52.24±0.41",
            "fedamp": "84.99±1.82|68.26±0.79|64.87±0.95",
            "fedper": "84.43±0.47|68.80±0.49|64.92±0.66",
            "fedrep": "84.59±1.58|67.69±0.86|60.52±0.72",
            "fedbn": "83.55±2.32|66.79±1.08|62.20±0.67",
            "fedrod": "86.23±2.12|72.34±1.77|68.45±1.94",
            "pfedsd": "86.34±2.61|71.97±2.07|67.21±1.89",
            "pfedgate": "87.25±1.91|71.98±1.61|67.85±0.87",
            "fedcac": "86.82±1.18|69.83±0.46|65.39±0.51",
            "pfedpt": "82.38±2.91|67.33±1.33|64.37±1.22",
            "fedpft": "87.23±2.69|74.10±1.95|69.23±0.76",
            "fedpft_con": "88.60±2.19|77.54±1.88|74.81±0.77",
        },
    },
    "T2": {
        "source": "FedPFT T2 (both versions): Dirichlet CIFAR-100 and Tiny-ImageNet, ResNet-10, 40 clients",
        "columns": ["C100 α=0.1", "C100 α=0.5", "C100 α=1.0", "Tiny α=0.1", "Tiny α=0.5", "Tiny α=1.0"],
        "rows": {
            "fedavg": "34.91±0.86|32.78±0.23|33.94±0.39|21.26±1.28|20.32±0.91|17.20±0.54",
            "local": "47.61±0.96|22.65±0.51|18.76±0.63|24.07±0.62|8.75±0.30|6.87±0.28",
            "fedamp": "46.68±1.06|24.74±0.58|18.22±0.41|27.85±0.71|10.70±0.32|7.13±0.21",
            "fedper": "51.38±0.94|28.25±1.03|21.53±0.50|32.33±0.31|12.69±0.42|8.67±0.40",
            "fedrep": "51.25±1.37|26.97±0.33|20.63±0.42|30.83±1.05|12.14±0.28|8.37±0.25",
            "fedbn": "54.35±0.63|36.94±0.94|33.67±0.12|33.34±0.71|19.61±0.35|16.57±0.44",
            "fedrod": "60.17±0.48|39.88±1.18|36.80±0.56|41.06±0.77|25.63±1.11|22.32±1.13",
            "pfedsd": "54.14±0.77|41.06±0.83|38.27±0.20|39.31±0.19|19.25±1.80|15.91±0.33",
            "pfedgate": "48.54±0.39|27.47±0.79|22.98±0.03|37.59±0.39|24.09±0.67|19.69±0.14",
            "fedcac": "57.22±1.52|38.64±0.63|32.59±0.32|40.19±1.20|23.70±0.28|18.58±0.62",
            "pfedpt": "43.21±1.66|35.23±0.87|36.25±0.37|23.55±0.68|22.35±0.49|21.69±0.24",
            "fedpft": "60.98±0.39|44.87±0.76|41.83±0.37|41.49±0.10|28.61±0.40|25.10±0.59",
            "fedpft_con": "62.03±1.41|47.98±0.78|44.29±0.74|43.42±1.62|32.44±0.58|27.84±0.41",
        },
    },
    "T-Path": {
        "source": "FedPFT ICLR T7 / arXiv T6: pathological non-IID (2 / 20 / 40 classes per client)",
        "columns": ["CIFAR-10", "CIFAR-100", "Tiny-ImageNet"],
        "rows": {
            "fedavg": "54.33±3.03|34.27±0.44|18.05±0.23",
            "local": "85.85±0.93|38.40±0.69|16.20±0.30",
            "fedamp": "88.88±0.83|38.36±0.79|16.13±0.55",
            "fedper": "87.51±0.95|41.54±0.74|20.25±0.65",
            "fedrep": "87.10±0.91|40.63±0.74|19.24±0.33",
            "fedbn": "87.02±1.41|47.75±1.03|24.91±0.48",
            "fedrod": "88.06±1.70|52.55±0.92|32.25±0.80",
            "pfedsd": "89.97±1.45|52.30±1.18|30.27±0.78",
            "pfedgate": "89.15±0.76|43.73±0.14|22.42±0.83",
            "fedcac": "89.77±1.14|49.07±0.87|30.83±0.42",
            "pfedpt": "86.29±1.11|39.92±0.33|21.38±0.98",
            "fedpft": "89.67±1.96|57.62±1.18|36.13±1.32",
            "fedpft_con": "90.55±1.35|58.14±0.71|37.59±0.39",
        },
    },
    "T-Ablation": {
        "source": "FedPFT ICLR T4 / arXiv T3: ablation on CIFAR-100, Dirichlet (settings I-VI as in ICLR; "
                  "arXiv's VI and VII, which ICLR drops, as arXiv-VI and arXiv-VII; arXiv's VIII is ICLR's VI)",
        "index": "setting",
        "columns": ["α=0.1", "α=0.5"],
        "rows": {
            "I": "33.87±1.35|30.09±0.31",
            "II": "40.97±1.28|31.45±1.35",
            "III": "60.98±0.39|44.87±0.76",
            "IV": "61.13±0.50|47.67±1.42",
            "V": "62.03±1.41|47.98±0.78",
            "VI": "53.76±0.35|39.29±1.00",
            "arXiv-VI": "36.24±1.10|34.70±1.33",
            "arXiv-VII": "53.17±0.58|38.90±0.91",
        },
    },
    "T-Probe": {
        "source": "FedPFT ICLR T5 / arXiv T8: linear-probe accuracy",
        "columns": ["C10 α=0.1", "C10 α=0.5", "C10 α=1.0", "C100 α=0.1", "C100 α=0.5", "C100 α=1.0"],
        "rows": {
            "fedavg": "85.01|72.52|68.38|59.50|37.40|32.33",
            "fedper": "84.44|71.07|66.51|52.09|26.61|20.51",
            "fedbn": "84.52|70.15|66.51|57.86|35.24|30.28",
            "fedcac": "85.22|71.56|66.98|56.86|34.64|29.35",
            "fedrod": "82.79|67.07|63.12|56.88|33.99|29.22",
            "pfedsd": "85.86|72.42|68.12|60.07|37.33|31.99",
            "fedpft": "85.52|72.59|69.57|61.60|43.14|38.47",
            "fedpft_con": "87.83|77.25|74.02|64.12|46.43|40.95",
        },
    },
    "T-Prompt": {
        "source": "FedPFT ICLR T6 / arXiv T5: linear probe on φ output (None) vs τ output with p_κ or p_ρ, "
                  "FedPFT+Con",
        "index": "probe point",
        "columns": ["C10 α=0.1", "C10 α=0.5", "C10 α=1.0", "C100 α=0.1", "C100 α=0.5", "C100 α=1.0"],
        "rows": {
            "None": "87.69|77.12|73.93|64.08|46.50|40.79",
            "p_κ": "87.83|77.25|74.02|64.12|46.43|40.95",
            "p_ρ": "87.82|77.25|74.02|64.18|46.40|40.95",
        },
    },
    "T9": {
        "source": "FedPFT ICLR T9: FedAvg+Linear",
        "columns": ["C10 α=0.1", "C10 α=0.5", "C10 α=1.0", "C100 α=0.1", "C100 α=0.5", "C100 α=1.0"],
        "rows": {
            "fedavg": "60.39±1.46|60.41±1.36|60.91±0.72|34.91±0.86|32.78±0.23|33.94±0.39",
            "local": "81.91±3.09|60.15±0.86|52.24±0.41|47.61±0.96|22.65±0.51|18.76±0.63",
            "fedavg_linear": "85.96±2.23|71.17±1.28|67.63±0.83|58.07±0.41|37.09±0.85|31.23±0.24",
            "fedpft": "87.23±2.69|74.10±1.95|69.23±0.76|60.98±0.39|44.87±0.76|41.83±0.37",
            "fedpft_con": "88.60±2.19|77.54±1.88|74.81±0.77|62.03±1.41|47.98±0.78|44.29±0.74",
        },
    },
    "T10": {
        "source": "FedPFT ICLR T10: feature shift, one domain per client, Origin / Match",
        "columns": ["PACS Origin", "PACS Match", "DomainNet Origin", "DomainNet Match"],
        "rows": {
            "fedavg": "71.48|75.49|63.53|67.17",
            "fedper": "74.86|75.31|65.70|65.67",
            "fedbn": "73.91|74.71|67.57|68.57",
            "fedcac": "74.94|75.94|67.80|68.53",
            "fedpft": "77.67|77.64|70.37|70.57",
        },
    },
    "T11": {
        "source": "FedPFT ICLR T11: 100 clients, CIFAR-10 Dirichlet",
        "columns": ["α=0.1", "α=0.5", "α=1.0"],
        "rows": {
            "fedper": "84.68|71.40|66.92",
            "fedbn": "85.51|70.85|67.18",
            "fedrod": "87.58|75.23|70.99",
            "fedcac": "87.40|72.82|69.06",
            "fedpft": "88.43|76.49|72.53",
        },
    },
    "T12": {
        "source": "FedPFT ICLR T12: ResNet-18, CIFAR-10 Dirichlet",
        "columns": ["α=0.1", "α=0.5", "α=1.0"],
        "rows": {
            "fedper": "82.80|65.35|61.83",
            "fedbn": "78.10|55.38|56.88",
            "fedrod": "83.50|67.55|62.05",
            "fedcac": "82.60|63.27|60.53",
            "fedpft": "83.52|68.93|64.95",
        },
    },
    "T13": {
        "source": "FedPFT ICLR T13: partial participation, FedPFT, α = 0.5",
        "index": "dataset",
        "columns": ["100%", "90%", "70%", "50%"],
        "rows": {
            "CIFAR-10": "74.10±1.95|73.88±1.84|74.21±1.45|74.33±1.38",
            "CIFAR-100": "44.87±0.76|45.74±0.32|45.46±1.14|45.87±0.81",
            "Tiny": "28.61±0.40|28.53±0.62|29.24±0.16|29.90±0.10",
        },
    },
    "T9-arXiv": {
        # The arXiv version's numbers for the same study (its App. G); the setup differs from ICLR's
        # (FedPFT there is the method with L_Con), so the two quotes are shown apart.
        "source": "FedPFT arXiv T9: partial participation, FedPFT (arXiv's, with L_Con)",
        "index": "dataset",
        "columns": ["100%", "90%", "70%", "50%"],
        "rows": {
            "CIFAR-10": "88.60±2.19|88.50±2.01|88.57±2.53|88.69±1.83",
            "CIFAR-100": "62.03±1.41|61.65±0.41|63.54±0.55|63.97±0.10",
            "Tiny": "43.42±1.62|43.03±2.09|44.59±1.19|45.81±1.02",
        },
    },
    "T15": {
        "source": "FedPFT ICLR T15 / arXiv T10: parameters uploaded per client per round (100-class heads)",
        "index": "model",
        "columns": ["φ (M)", "τ (M)", "h_κ (K)", "h_ρ (K)", "FedAvg (M)", "FedPFT (M)", "FedPFT+Con (M)",
                    "FedPFT overhead %", "FedPFT+Con overhead %"],
        "rows": {
            "ResNet-8": "1.24|0.26|25.70|32.90|1.27|1.53|1.56|20.47|23.14",
            "ResNet-10": "4.91|1.05|51.30|65.66|4.96|6.01|6.08|21.17|22.49",
        },
    },
    "T14": {
        "source": "FedPFT ICLR T14: mean time per round (s), CIFAR-100, ResNet-10, 4× RTX 2080",
        "index": "row",
        "columns": ["fedavg", "fedper", "fedbn", "fedrod", "fedcac", "fedpft"],
        "rows": {"seconds": "50.10|51.81|52.65|54.76|55.35|51.61"},
    },
}
