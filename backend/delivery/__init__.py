"""Delivery: getting each queued training trained exactly once, whatever fails on the way.

Celery and a broker (Redis, or the embedded SQLite default) carry the messages, but the
trainings table is the source of truth: a message only says "look at training N". Each send is
recorded on the training (`send`), a delivery claims the training with a conditional UPDATE and
holds a lease fenced by its attempt number (`claims`, `leases`), workers beat in the database
(`liveness`), and the reconciler takes back expired leases and re-sends queued trainings whose
last message is overdue (`reconcile`), from the table alone. Duplicate messages are therefore
harmless and lost ones are repaired; `supervisor` keeps `orrery serve`'s worker running.

Nothing here imports torch: the API process uses the sending and the reconciler.
"""
