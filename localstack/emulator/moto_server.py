"""moto_server with its per-message hot paths made cheap; behaviour unchanged.

moto (pinned in localstack/requirements.txt) answers every SQS call by
walking every message of the queue several times, reading the clock through
two datetime conversions per message per walk:

- SendMessage reads ``queue.attributes`` (once for a standard queue, twice
  for a FIFO queue) only to learn ContentBasedDeduplication; computing it
  walks every message three times to count the visible, delayed and in-flight
  ones (four clock reads per message);
- ReceiveMessage checks each message it returns against the retention period
  through ``get_queue_attributes``, which computes ``queue.attributes`` three
  times;
- EventBridge's SQS targets go through SendMessage, and every target's input
  is rendered with a fresh JSONPath parse of each path (eight for a target
  without a transformer, the archive's included).

So a call costs O(backlog) at ~12 us per waiting message: with a thousand
messages in a queue every send to it costs ~25 ms of moto's single Python
process, and a pipeline whose queues fill slows down the more they fill (the
collapse issue 19 saw, and the event lag of issue 18: a `make bench` profile
with py-spy had 91% of moto's time in `Queue.attributes` under `PutEvents`).
AWS's calls do not grow with the backlog.

What this changes, and only this (every answer is the same):
- the clock that SQS's models read is ``time.time()`` (what moto's
  ``unix_time()`` computes through datetime, to the microsecond);
- a message's ``visible``/``delayed`` and the queue's ``messages`` read the
  clock once per walk, not per message;
- ``queue.attributes`` counts the three ``ApproximateNumberOfMessages*`` in one
  walk instead of three;
- the retention check reads the queue's retention period directly;
- ``jsonpath_ng.ext.parse`` is memoised (parsed paths are immutable; moto
  parses the same few paths for every event);
- the list of moto's service modules, which the dispatcher read from the
  disk (a directory listing and ~200 ``isdir``) for every request while
  holding the lock every request takes, is read once;
- the access log (a line per request, 14% of moto's time under `make bench`
  once the above was gone) is off unless CONVEYOR_MOTO_ACCESS_LOG=1;
- a long poll that finds only messages of FIFO groups in flight waits on the
  queue's condition (50 ms at most, a send wakes it) instead of spinning a
  core for its whole WaitTimeSeconds (``_patch_sqs_wait``).

Apart from the patches, CONVEYOR_MOTO_STATE names a file moto's state is
kept in between runs (``_keep_state``): `make run` keeps its data, as AWS
would; tests never set it.

Each patch checks that the moto it patches has what it expects, and leaves
moto alone (saying so on stderr) when it does not, so a moto upgrade degrades
to stock behaviour, never to different behaviour.

Run as: python moto_server.py [moto_server arguments]
"""

import atexit
import functools
import inspect
import io
import os
import pickle
import sys
import threading
import time


def _warn(what: str, err: BaseException) -> None:
    print(f"conveyor moto patches: {what} left as moto ships it ({err!r})", file=sys.stderr)


def _patch_sqs() -> None:
    from moto.sqs import models

    Queue, Message, Backend = models.Queue, models.Message, models.SQSBackend
    # Refuse to patch a moto whose shapes differ from the one these patches were
    # written against.
    for cls, names in ((Queue, ("attributes", "messages", "approximate_number_of_messages",
                                "approximate_number_of_messages_delayed",
                                "approximate_number_of_messages_not_visible")),
                       (Message, ("visible", "delayed"))):
        for name in names:
            if not isinstance(getattr(cls, name, None), property):
                raise AttributeError(f"{cls.__name__}.{name} is not a property")
    if not hasattr(Backend, "is_message_valid_based_on_retention_period"):
        raise AttributeError("SQSBackend.is_message_valid_based_on_retention_period is missing")
    for name in ("unix_time", "unix_time_millis"):
        if not callable(getattr(models, name, None)):
            raise AttributeError(f"moto.sqs.models.{name} is missing")

    slow_unix_time, slow_unix_time_millis = models.unix_time, models.unix_time_millis

    def unix_time(dt=None):
        return time.time() if dt is None else slow_unix_time(dt)

    def unix_time_millis(dt=None):
        return time.time() * 1000.0 if dt is None else slow_unix_time_millis(dt)

    models.unix_time, models.unix_time_millis = unix_time, unix_time_millis

    Message.visible = property(lambda self: time.time() * 1000.0 > self.visible_at)
    Message.delayed = property(lambda self: time.time() * 1000.0 < self.delayed_until)

    def messages(self):
        now = time.time() * 1000.0
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    Queue.messages = property(messages)

    def counts(self):
        """(visible and not delayed, delayed, in flight), in one walk."""
        now = time.time() * 1000.0
        ready = delayed = in_flight = 0
        for m in list(self._messages):
            is_delayed = now < m.delayed_until
            is_visible = now > m.visible_at
            if is_delayed:
                delayed += 1
            if not is_visible:
                in_flight += 1
            elif not is_delayed:
                ready += 1
        return ready, delayed, in_flight

    def counted(index):
        def get(self):
            c = getattr(self, "_conveyor_counts", None)
            return (c if c is not None else counts(self))[index]
        return property(get)

    Queue.approximate_number_of_messages = counted(0)
    Queue.approximate_number_of_messages_delayed = counted(1)
    Queue.approximate_number_of_messages_not_visible = counted(2)

    stock_attributes = Queue.attributes.fget

    def attributes(self):
        # The three counts are read while the stock property builds the dict;
        # a concurrent caller that finds them gone counts for itself.
        self._conveyor_counts = counts(self)
        try:
            return stock_attributes(self)
        finally:
            self._conveyor_counts = None

    Queue.attributes = property(attributes)

    def is_message_valid_based_on_retention_period(self, queue_name, message):
        queue = self.get_queue(queue_name)
        return int(queue.message_retention_period) + message.sent_timestamp / 1000 > time.time()

    Backend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period


def _patch_sqs_wait() -> None:
    """A long poll on a FIFO queue whose visible messages all belong to groups
    in flight waits instead of spinning.

    moto's ReceiveMessage, having taken nothing, calls
    ``queue.wait_for_messages(1)``, which returns at once while any message is
    visible, so the loop spins for the whole WaitTimeSeconds at a full core
    (a poller on an owner's slot with a job in flight: twenty seconds a
    receive). Here it waits on the queue's condition, which a send notifies,
    for at most 50 ms: a group freed by a delete or a visibility change (which
    notify nothing) is seen within that, a new message at once.
    """
    from moto.sqs import models

    Queue = models.Queue
    if not callable(getattr(Queue, "wait_for_messages", None)):
        raise AttributeError("Queue.wait_for_messages is missing")
    if "_messages_lock" not in inspect.getsource(Queue.wait_for_messages):
        raise AttributeError("Queue.wait_for_messages does not wait on _messages_lock")

    def wait_for_messages(self, timeout):
        with self._messages_lock:
            if self.messages:
                self._messages_lock.wait(timeout=min(timeout, 0.05))
            else:
                self._messages_lock.wait_for(lambda: self.messages, timeout=timeout)

    Queue.wait_for_messages = wait_for_messages


def _patch_jsonpath() -> None:
    import jsonpath_ng.ext

    jsonpath_ng.ext.parse = functools.lru_cache(maxsize=1024)(jsonpath_ng.ext.parse)


def _patch_dispatch() -> None:
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    if not modules:
        raise RuntimeError("moto lists no service modules")
    backends.list_of_moto_modules = lambda: modules


def _quiet_access_log() -> None:
    import logging
    import os

    if os.environ.get("CONVEYOR_MOTO_ACCESS_LOG") != "1":
        logging.getLogger("werkzeug").setLevel(logging.WARNING)


# The services whose state a kept stack restores (CONVEYOR_MOTO_STATE).
_KEPT_SERVICES = ("s3", "sqs", "kms", "secretsmanager", "events", "scheduler")


class _StatePickler(pickle.Pickler):
    """Pickles moto's backends: locks are made anew, RSA keys (moto gives
    every KMS key one) travel as PEM."""

    def reducer_override(self, obj):
        if isinstance(obj, _LOCK_TYPES):
            return (threading.Lock if isinstance(obj, _LOCK_TYPES[0]) else threading.RLock), ()
        if hasattr(obj, "private_bytes") and hasattr(obj, "public_key"):
            from cryptography.hazmat.primitives import serialization

            pem = obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
            return _load_private_key, (pem,)
        return NotImplemented


_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _load_private_key(pem: bytes):
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_private_key(pem, password=None)


def _backend_dicts():
    from moto import backends

    for name in _KEPT_SERVICES:
        yield name, backends.get_backend(name)


def _save_state(path: str) -> None:
    """Writes every kept service's backends to path (atomically). A request
    changing a backend while it is read makes the attempt fail; it is
    retried."""
    for _ in range(5):
        buf = io.BytesIO()
        try:
            _StatePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(
                {name: dict(bd) for name, bd in _backend_dicts()})
        except RuntimeError:  # a dict changed size while it was pickled
            time.sleep(0.05)
            continue
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)
        return
    print(f"conveyor moto: could not save the state to {path}", file=sys.stderr)


def _keep_state() -> None:
    """With CONVEYOR_MOTO_STATE set, moto's state (buckets and objects,
    queues and their messages, keys, secrets, buses, schedules) is read from
    that file at start and written to it every CONVEYOR_MOTO_STATE_EVERY
    seconds (default 10) and when the process is told to stop — what
    `make run` keeps between runs (AWS keeps it; moto keeps nothing)."""
    path = os.environ.get("CONVEYOR_MOTO_STATE")
    if not path:
        return
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                state = pickle.load(f)
            for name, bd in _backend_dicts():
                if name in state:
                    bd.clear()
                    bd.update(state[name])
            print(f"conveyor moto: state restored from {path}", file=sys.stderr)
        except Exception as err:  # another moto's pickle: start empty, say so
            print(f"conveyor moto: the state in {path} could not be read ({err!r}); starting empty", file=sys.stderr)
    every = float(os.environ.get("CONVEYOR_MOTO_STATE_EVERY", "10"))

    def periodically() -> None:
        while True:
            time.sleep(every)
            _save_state(path)

    threading.Thread(target=periodically, daemon=True).start()

    # moto's own SIGTERM and SIGINT handlers exit through sys.exit: the
    # state is written on the way out.
    atexit.register(_save_state, path)


def main() -> None:
    for what, patch in (("SQS", _patch_sqs), ("SQS long polls", _patch_sqs_wait), ("JSONPath parsing", _patch_jsonpath),
                        ("the service dispatcher", _patch_dispatch), ("the access log", _quiet_access_log)):
        try:
            patch()
        except Exception as err:  # a different moto: run it unpatched
            _warn(what, err)
    _keep_state()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
