"""The service interface in Python: deploy functions as services on an
endpoint (``serve``) and run each instance the endpoint creates (``runner``)."""
