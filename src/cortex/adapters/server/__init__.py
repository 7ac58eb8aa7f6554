"""The team server: Cortex's services over HTTP for many tenants (FastAPI on uvicorn).

``create_app`` builds the application; ``cortex serve`` runs it. FastAPI is imported only
here, when the server is asked for.
"""
