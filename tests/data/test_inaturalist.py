"""The federated iNaturalist loader, on small files in the release's layout (iNaturalist 2017's
``train_val_images/<supercategory>/<species>/<id>.jpg`` and Hsu et al.'s split csv files), and the
per-user partition it feeds."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fedrepro.data import REHEARSAL_ROOT, dataset_options, load_dataset
from fedrepro.data.partition import make_partition
from fedrepro.errors import ConfigError, CorruptCacheError, DataNotFoundError, PartitionError

pytestmark = pytest.mark.usefixtures("_isolated")

# (supercategory, species folder, class id, colour): the class ids are the split files', not the
# folders' order.
SPECIES = [("Aves", "Turdus migratorius", 2, (250, 10, 10)), ("Plantae", "Quercus alba", 0, (10, 250, 10)),
           ("Insecta", "Danaus plexippus", 1, (10, 10, 250))]
# (user, class id, how many): user 7 has 3 images, below a minimum of 4; user ids sort numerically
# (9 before 10), and "NA" names no user.
TRAIN = [("10", 0, 3), ("10", 2, 2), ("9", 1, 4), ("7", 2, 3), ("NA", 0, 1)]
TEST = [(0, 2), (1, 1), (2, 3)]


def write_inat(root: Path) -> Path:
    folder = root / "inaturalist"
    by_class = {c: (sup, sp, col) for sup, sp, c, col in SPECIES}
    n = 0

    def image(cls: int) -> str:
        nonlocal n
        sup, sp, col = by_class[cls]
        d = folder / "train_val_images" / sup / sp
        d.mkdir(parents=True, exist_ok=True)
        image_id = f"{n:032x}"  # the release's ids are 32 hex digits
        Image.new("RGB", (40 + n, 30), col).save(d / f"{image_id}.jpg", quality=95)
        n += 1
        return image_id

    train_rows = [f"{u},{image(c)},{c},{100 + c}" for u, c, k in TRAIN for _ in range(k)]
    test_rows = [f"{image(c)},{c},{100 + c}" for c, k in TEST for _ in range(k)]
    splits = folder / "inaturalist-user-120k"
    splits.mkdir(parents=True)
    (splits / "federated_train_user_120k.csv").write_text("user_id,image_id,class,label\n" + "\n".join(train_rows)
                                                          + "\n")
    (splits / "test.csv").write_text("image_id,class,label\n" + "\n".join(test_rows) + "\n")
    image(0)  # an image the split does not list: ignored
    return folder


def test_images_labels_and_users_load(tmp_path: Path) -> None:
    folder = write_inat(tmp_path)
    ds = load_dataset("inaturalist", root=tmp_path, image_size=16)
    assert ds.train_x.shape == (12, 3, 16, 16) and ds.test_x.shape == (6, 3, 16, 16)
    assert ds.train_x.dtype == torch.uint8
    assert ds.classes == ["Quercus alba", "Danaus plexippus", "Turdus migratorius"]
    assert ds.train_y.tolist() == [0] * 3 + [2] * 2 + [1] * 4 + [2] * 3
    assert ds.test_y.tolist() == [0, 0, 1, 2, 2, 2]
    # Users by their ids in numeric order: 7 -> 0, 9 -> 1, 10 -> 2; the "NA" row is left out.
    assert ds.train_user.tolist() == [2] * 5 + [1] * 4 + [0] * 3
    colour = {c: col for _, _, c, col in SPECIES}
    for x, y in zip(ds.test_x, ds.test_y):
        assert int(x[:, 8, 8].float().argmax()) == int(np.argmax(colour[int(y)]))
    assert (folder / ".fedrepro_cache_16.pt").is_file()
    assert "image_size" in dataset_options("inaturalist")


def test_the_cache_serves_a_second_load_and_follows_the_split_files(tmp_path: Path) -> None:
    folder = write_inat(tmp_path)
    first = load_dataset("inaturalist", root=tmp_path, image_size=8)
    for p in (folder / "train_val_images").rglob("*.jpg"):
        p.unlink()
    again = load_dataset("inaturalist", root=tmp_path, image_size=8)
    assert torch.equal(again.train_x, first.train_x) and torch.equal(again.train_user, first.train_user)
    test_csv = folder / "inaturalist-user-120k" / "test.csv"
    test_csv.write_text(test_csv.read_text() + "ffff,1,101\n")
    with pytest.warns(UserWarning, match="stale"), pytest.raises(CorruptCacheError, match="not under"):
        load_dataset("inaturalist", root=tmp_path, image_size=8)


def test_one_client_per_user_of_the_minimum_disjoint(tmp_path: Path) -> None:
    write_inat(tmp_path)
    ds = load_dataset("inaturalist", root=tmp_path, image_size=8)
    rng = np.random.default_rng(0)
    part = make_partition("by_user", ds.train_y.numpy(), ds.test_y.numpy(), 2, rng,
                          train_users=ds.train_user.numpy(), min_train=4)
    users = ds.train_user.numpy()
    # Users 9 and 10 (indices 1 and 2) have 4 and 5 images; user 7's 3 train no one.
    assert part.meta["client_user"] == [1, 2] and part.meta["dropped_users"] == 1
    assert [sorted(set(users[t].tolist())) for t in part.train] == [[1], [2]]
    assert sum(t.size for t in part.train) == 9 and part.meta["dropped_train"] == 3
    every = np.concatenate(part.train)
    assert every.size == np.unique(every).size
    tests = np.concatenate(part.test)
    assert tests.size == np.unique(tests).size
    # Each client's test images are of its own classes only.
    y_tr, y_te = ds.train_y.numpy(), ds.test_y.numpy()
    for tr, te in zip(part.train, part.test):
        assert set(y_te[te].tolist()) <= set(y_tr[tr].tolist())
    # Everything but the users is the client count's business: a wrong one says the right one.
    with pytest.raises(PartitionError, match="num_clients=2"):
        make_partition("by_user", y_tr, y_te, 3, rng, train_users=users, min_train=4)
    assert make_partition("by_user", y_tr, y_te, 3, rng, train_users=users, min_train=3).num_clients == 3
    with pytest.raises(PartitionError, match="needs train_users"):
        make_partition("by_user", y_tr, y_te, 2, rng, min_train=4)
    with pytest.raises(PartitionError, match="min_train"):
        make_partition("by_user", y_tr, y_te, 2, rng, train_users=users, min_train=0)


def test_the_missing_data_error_names_every_path_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("inaturalist", root=tmp_path)
    msg = str(err.value)
    folder = tmp_path / "inaturalist"
    for p in (folder, folder / "inaturalist-user-120k" / "federated_train_user_120k.csv",
              folder / "inaturalist-user-120k" / "test.csv", folder / "train_val_images"):
        assert str(p) in msg
    assert "'inaturalist'" in msg and "inaturalist-user-120k.zip" in msg and "inat_comp" in msg


def test_columns_are_options_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    folder = write_inat(tmp_path)
    train_csv = folder / "inaturalist-user-120k" / "federated_train_user_120k.csv"
    train_csv.write_text(train_csv.read_text().replace("user_id,", "author,", 1))
    with pytest.raises(CorruptCacheError, match="no column.*user_id.*author"):
        load_dataset("inaturalist", root=tmp_path, image_size=8)
    assert len(load_dataset("inaturalist", root=tmp_path, image_size=8, user_column="author").train_y) == 12


@pytest.mark.parametrize("options, name", [({"image_size": 0}, "image_size"), ({"user_column": ""}, "user_column"),
                                           ({"train_csv": 3}, "train_csv"), ({"split": "geo"}, "split")])
def test_bad_options_are_one_line_errors(tmp_path: Path, options: dict, name: str) -> None:
    with pytest.raises(ConfigError, match=name) as err:
        load_dataset("inaturalist", root=tmp_path, **options)
    assert "\n" not in str(err.value)


def test_the_rehearsal_serves_the_papers_users(monkeypatch: pytest.MonkeyPatch) -> None:
    import fedrepro.data.rehearsal as rehearsal

    monkeypatch.setattr(rehearsal, "BUDGET_BYTES", 2**20)
    ds = load_dataset("inaturalist", root=REHEARSAL_ROOT, image_size=8)
    assert ds.num_classes == 1203 and ds.train_user is not None
    sizes = np.bincount(ds.train_user.numpy())
    assert (sizes >= 16).sum() == 1018 and (sizes < 16).any()
    part = make_partition("by_user", ds.train_y.numpy(), ds.test_y.numpy(), 1018, np.random.default_rng(0),
                          train_users=ds.train_user.numpy(), min_train=16)
    assert min(t.size for t in part.train) >= 16


def test_a_run_config_partitions_by_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fedrepro.config import RunConfig
    from fedrepro.runs.pipeline import prepare_data

    write_inat(tmp_path)
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path))
    cfg = RunConfig().replace(**{"data.dataset": "inaturalist", "data.dataset_args": {"image_size": 8},
                                 "data.partition": "by_user", "data.partition_args": {"min_train": 4},
                                 "data.num_clients": 2})
    ds, part = prepare_data(cfg)
    assert part.meta["client_user"] == [1, 2]
    users = ds.train_user.numpy()
    assert [set(users[t].tolist()) for t in part.train] == [{1}, {2}]


def test_a_bad_class_id_names_its_line(tmp_path: Path) -> None:
    folder = write_inat(tmp_path)
    train_csv = folder / "inaturalist-user-120k" / "federated_train_user_120k.csv"
    lines = train_csv.read_text().splitlines()
    lines[13] = lines[13].replace(",0,100", ",x,100")  # the "NA" row, line 14: checked too
    train_csv.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptCacheError, match="line 14: class 'x'"):
        load_dataset("inaturalist", root=tmp_path, image_size=8)
