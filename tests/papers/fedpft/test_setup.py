"""FedPFT's paper setup is the paper's protocol."""
from fedrepro.papers import setup


def test_fedpft_paper_setup_is_the_papers_protocol():
    """FedPFT (ICLR) §4.1: 40 clients × 500/100 on CIFAR-10, ResNet-8, B = 100, R = 5, T = 1000."""
    cfg = setup("fedpft", "paper")
    assert (cfg.data.dataset, cfg.data.num_clients, cfg.data.partition) == ("cifar10", 40, "fixed_dirichlet")
    assert cfg.data.partition_args == {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}
    assert (cfg.model.name, cfg.model.args) == ("resnet8", {"width": 64})
    t = cfg.train
    assert (t.rounds, t.local_epochs, t.batch_size, t.lr) == (1000, 5, 100, 0.1)
