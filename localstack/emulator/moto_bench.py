"""Cost of moto's SQS and EventBridge calls as a queue's backlog grows.

Start a moto (stock: .venv/bin/moto_server -p 5000; patched: the same
through localstack/emulator/moto_server.py), then:

    .venv/bin/python localstack/emulator/moto_bench.py http://127.0.0.1:5000

It fills a FIFO queue to each backlog and times SendMessage, a ReceiveMessage
of ten, and a PutEvents of ten entries into a bus whose rule targets a
standard queue that is never drained. Stock moto on a quiet 2-core machine
(2026-11-23): at 1000 waiting messages a send takes ~300 ms and a receive
~2.4 s; patched, tens of milliseconds, as at an empty queue.
"""

import json
import sys
import time

import boto3

endpoint = sys.argv[1]
backlogs = [int(b) for b in sys.argv[2:]] or [0, 1000]
kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
sqs, events = boto3.client("sqs", **kw), boto3.client("events", **kw)
queue = sqs.create_queue(QueueName="bench.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
sqs.create_queue(QueueName="tap")
events.create_event_bus(Name="bench")
events.put_rule(Name="tap", EventBusName="bench", EventPattern=json.dumps({"source": ["bench"]}))
events.put_targets(Rule="tap", EventBusName="bench", Targets=[{"Id": "tap", "Arn": "arn:aws:sqs:us-east-1:123456789012:tap"}])


def waiting() -> int:
    a = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    return int(a["Attributes"]["ApproximateNumberOfMessages"])


def timed(n, call) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        call(i)
    return (time.perf_counter() - t0) / n * 1000


for backlog in backlogs:
    have = waiting()
    for i in range(have, backlog):
        sqs.send_message(QueueUrl=queue, MessageBody="x", MessageGroupId=f"g{i}", MessageDeduplicationId=f"d{i}")
    send = timed(50, lambda i: sqs.send_message(QueueUrl=queue, MessageBody="y", MessageGroupId=f"h{backlog}-{i}",
                                                 MessageDeduplicationId=f"e{backlog}-{i}"))
    receive = timed(20, lambda i: sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=300))
    put = timed(20, lambda i: events.put_events(Entries=[{"Source": "bench", "DetailType": "d", "Detail": "{}",
                                                           "EventBusName": "bench"}] * 10))
    print(f"backlog {backlog}: SendMessage {send:.1f} ms, ReceiveMessage (10) {receive:.1f} ms, PutEvents (10) {put:.1f} ms")
