"""The API's routers, one per resource, and the dashboard's pages; `backend.api.app` mounts
them. Who may see what is decided in `backend.api.access`, which every router uses."""
