"""``GET /docs`` and ``GET /redoc``: the API's documentation pages, only with ``sidecar.rest.docs.enable``.

They are FastAPI's pages, whose scripts, style sheets and fonts come from public CDNs. Off by default, so that on the
origin where a writer may paste the bearer token only the sidecar's own scripts run; when on, each page carries a
Content-Security-Policy that lets it load those CDNs' files, run its own inline script (by its digest) and ask this
origin for the OpenAPI document, and nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

# What each page loads: FastAPI's pages take Swagger UI and ReDoc from jsDelivr, ReDoc's fonts from Google Fonts and
# both their icons from FastAPI's site. ReDoc styles its page with inline style elements and parses in a worker.
SWAGGER_UI_SOURCES = ("script-src https://cdn.jsdelivr.net {inline}; style-src https://cdn.jsdelivr.net; "
                      "img-src 'self' data: https://fastapi.tiangolo.com; connect-src 'self'")
REDOC_SOURCES = ("script-src https://cdn.jsdelivr.net {inline}; style-src https://fonts.googleapis.com "
                 "'unsafe-inline'; font-src https://fonts.gstatic.com; img-src 'self' data: https://cdn.redoc.ly "
                 "https://fastapi.tiangolo.com; worker-src blob:; connect-src 'self'")
# Nothing else: no other origin, no base, no form, no frame.
_FIXED = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
TITLE = "status-store API"


def content_security_policy(html: str, sources: str) -> str:
    """The policy of a page: ``sources``, with ``{inline}`` the digests of the page's inline scripts."""
    digests = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
                       for script in _INLINE_SCRIPT.findall(html))
    return f"{_FIXED}; {sources.format(inline=digests)}".replace("  ", " ")


def _page(response: HTMLResponse, sources: str) -> HTMLResponse:
    html = bytes(response.body).decode()
    return HTMLResponse(html, headers={"Content-Security-Policy": content_security_policy(html, sources),
                                       "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})


def docs_router(openapi_url: str) -> APIRouter:
    """The two pages, on the OpenAPI document at ``openapi_url``."""
    router = APIRouter(include_in_schema=False)
    swagger_ui = _page(get_swagger_ui_html(openapi_url=openapi_url, title=TITLE), SWAGGER_UI_SOURCES)
    redoc = _page(get_redoc_html(openapi_url=openapi_url, title=TITLE), REDOC_SOURCES)

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        return swagger_ui

    @router.get("/redoc")
    async def redoc_page() -> HTMLResponse:
        return redoc

    return router
