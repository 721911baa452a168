"""``python -m autorec.cli``: what torchrun's workers and the tests run.

A torchrun worker leaves with ``os._exit`` once its work is done and its output flushed: it skips
the interpreter's teardown, where the C++ threads of gloo and torchrec's process groups can still
be destroyed while joinable (SIGABRT, "terminate called without an active exception"). That
abort failed a finished two-node run of CI once even after the group was destroyed
(``leave_process_group``): the checkpoint and ``--output`` were already written, the launcher
still reported the worker as failed.
"""

import logging
import os
import sys

from autorec.cli.main import main
from autorec.train.launch import under_launcher

code = main()
if under_launcher():
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
