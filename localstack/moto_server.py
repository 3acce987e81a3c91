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

if __name__ == "__main__":
    server.main()
