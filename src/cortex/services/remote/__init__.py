"""Client mode: the services over a Cortex team server, with a local journal of writes.

``Services.open`` returns ``RemoteServices`` when ``server_url`` is set; ``client.py`` sends
and spools, ``journal.py`` keeps what the server did not take yet, ``transport.py`` speaks
HTTP with the standard library only.
"""
