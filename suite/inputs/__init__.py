"""Inputs the suite makes itself and the pipelines that feed them to a device, shared by the
data family (which measures the pipelines) and the training family (which feeds its models
from them): ``datasets`` (deterministic JPEG and ``.npy`` data sets, cached, no download),
``images`` (image batches through DataLoader, torchvision GPU decode, DALI) and ``tensors``
(an in-memory split's batches through an indexed gather, DataLoader or DALI), and ``cache``
(the cache folder they and other things made once, such as models written from a config,
live in). Importing this package is cheap: no torch."""
