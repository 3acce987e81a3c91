"""Start moto's server with its DynamoDB requests serialised.

moto's TransactWriteItems deep-copies a table for rollback while other
request threads modify it ("dictionary changed size during iteration" →
HTTP 500 under concurrent writes; moto 5.2.5). Real DynamoDB has no such
limit, so instead of weakening the product we make the emulator correct:
every DynamoDB request runs under one lock (they are short; SQS long polls
and S3 transfers stay concurrent). Arguments are moto_server's.
"""
import threading

import moto.server as server

_run_simple = server.run_simple
_dynamodb = threading.Lock()


def _serialise_dynamodb(app):
    def wrapped(environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            with _dynamodb:
                return list(app(environ, start_response))
        return app(environ, start_response)

    return wrapped


def _run(host, port, app, **kwargs):
    return _run_simple(host, port, _serialise_dynamodb(app), **kwargs)


server.run_simple = _run


# moto's TransactWriteItems deep-copies every table it touches so it can roll
# back, which makes each transaction O(table size): a benchmark of a few
# thousand jobs slows to seconds per transaction. Roll back from a snapshot
# of just the items the transaction touches instead (same semantics: on any
# failure no item is changed). Safe because DynamoDB requests run one at a
# time (above).
import copy as _copy

import moto.dynamodb.models as _models
from moto.dynamodb.models.table import Table as _Table


class _NoTableCopy:
    def __getattr__(self, name):
        return getattr(_copy, name)

    @staticmethod
    def deepcopy(x, memo=None):
        if isinstance(x, _Table):
            return x
        return _copy.deepcopy(x, memo)


_models.copy = _NoTableCopy()
_transact = _models.DynamoDBBackend.transact_write_items


def _key_of(table, op_type, op):
    if op_type == "Put":
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
        return key
    return op["Key"]


def _transact_write_items(self, transact_items):
    before = []
    for entry in transact_items:
        try:
            op_type, op = next(iter(entry.items()))
            name = op["TableName"]
            table = self.tables[name]
            key = _key_of(table, op_type, op)
            current = self.get_item(name, key)
        except Exception:
            continue
        before.append((name, key, current.to_json()["Attributes"] if current else None))
    try:
        return _transact(self, transact_items)
    except Exception:
        for name, key, attrs in reversed(before):
            try:
                if attrs is None:
                    self.delete_item(name, key)
                else:
                    self.put_item(name, attrs)
            except Exception:
                pass
        raise


_models.DynamoDBBackend.transact_write_items = _transact_write_items

if __name__ == "__main__":
    server.main()
