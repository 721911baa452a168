"""Criteo click logs (Kaggle Display Advertising, Terabyte): a streaming reader of the TSV layout.

Each line is ``label<TAB>I1..I13<TAB>C1..C26``: a 0/1 label, 13 decimal integer counts and 26
categorical ids written as hex; every field but the label may be empty. Files are plain or gzip
(told apart by their magic bytes, not their suffix); ``path`` is one file or a directory of part
files (Terabyte's ``day_0 .. day_23``), read in natural order.

What a sample becomes:

* dense ``int_0..int_12``: ``log1p(max(x, 0))`` as DLRM does; an empty field is 0, and the
  negative counts of the Kaggle data (-1, -2, -3 in I2) are clipped to 0 as well.
* sparse ``cat_0..cat_25``, one id each, id 0 meaning "empty field". Ids are either hashed
  (default): ``1 + mix64(value) % (hash_size - 1)``, or, with ``vocab_min_count``, looked up in a
  vocabulary built from the train split (one pass over the file when the dataset is opened):
  values seen at least ``vocab_min_count`` times get ids from 2 up, the rest share the OOV id 1.

Splits are drawn per line by a seeded hash of the line's position (file index, byte offset), so
every split streams the file once, in file order, and the same seed gives the same split whatever
the number of DataLoader workers. Workers share the file by blocks of ``block_bytes``: worker k of
W parses the blocks with ``(file index + block index) % W == k`` and no line is read twice. Plain
files are read only at the blocks a worker owns; a gzip stream cannot seek, so each worker
decompresses all of it and parses its own blocks.

Parsing is vectorised with numpy over a block at a time; when a block holds a malformed line the
error names the file and the line number (counted only then) and says what was expected.

The parts: :mod:`~autorec.data.criteo.blocks` (files read by blocks of whole lines),
:mod:`~autorec.data.criteo.parse` (a block of TSV lines -> numpy rows),
:mod:`~autorec.data.criteo.encode` (rows -> ids, dense values, splits),
:mod:`~autorec.data.criteo.stream` (rows -> torchrec Batches, per DataLoader worker) and
:mod:`~autorec.data.criteo.dataset` (``load_criteo`` and the RecDataset).
"""

from autorec.data.criteo.dataset import CriteoDataset, load_criteo
from autorec.data.criteo.encode import dense_transform, hashed_ids, split_of_lines, vocab_ids
from autorec.data.criteo.parse import DENSE_NAMES, N_DENSE, N_SPARSE, SPARSE_NAMES
from autorec.data.criteo.stream import CriteoStream

__all__ = ["DENSE_NAMES", "N_DENSE", "N_SPARSE", "SPARSE_NAMES", "CriteoDataset", "CriteoStream",
           "dense_transform", "hashed_ids", "load_criteo", "split_of_lines", "vocab_ids"]
