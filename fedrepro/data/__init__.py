"""Datasets: loaders returning an in-memory :class:`ImageDataset`, looked up by name.

Importing this package registers every loader with :data:`DATASETS`.
"""
from .base import ImageDataset, norm_tensors, to_float
from .registry import DATASETS, dataset_options, list_datasets, load_dataset, rehearsal_shape
from .root import REHEARSAL_ROOT, data_root, download_allowed, is_rehearsal

# Imported for their registration side effect.
from . import cifar, fashion_mnist, fashion_mnist_domains, image_folder, synthetic, tiny_imagenet  # noqa: F401, E402
from . import inaturalist  # noqa: F401, E402
from . import glyphs, splits  # noqa: F401, E402  (the pretraining source and its split)

__all__ = [
    "DATASETS",
    "ImageDataset",
    "REHEARSAL_ROOT",
    "data_root",
    "dataset_options",
    "download_allowed",
    "is_rehearsal",
    "list_datasets",
    "load_dataset",
    "rehearsal_shape",
    "norm_tensors",
    "to_float",
]
