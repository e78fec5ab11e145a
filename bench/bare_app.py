"""The baseline for bench/rest_api.py: a bare FastAPI app whose endpoints do nothing."""

from __future__ import annotations

from fastapi import FastAPI, Response

app = FastAPI()


@app.put("/connectors/{name}/status")
async def put_status(name: str) -> Response:
    """Accept and answer 202, reading nothing."""
    return Response(status_code=202)


@app.get("/connectors/{name}/status")
async def get_status(name: str) -> Response:
    """Answer 200 with a fixed body."""
    return Response(b'{"name":"x"}', media_type="application/json")
