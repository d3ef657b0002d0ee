"""Load a page in headless Chromium and report what a person would see: a screenshot, the page's text, and
every console error, uncaught exception and failed load (over the DevTools protocol, with aiohttp's
websocket client). Run as a separate process (``python -m tests.headless_chromium URL PNG``), away from the
gevent-patched test process; prints one JSON object.

Chromium runs with the flags that keep it off the network on a closed machine (no background networking,
component updates, sync or first-run pages) and with a throwaway profile.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import aiohttp

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")


def find_chromium() -> str | None:
    """The Chromium binary on PATH (or $CHROMIUM), None when there is none."""
    explicit = os.environ.get("CHROMIUM")
    if explicit and shutil.which(explicit):
        return shutil.which(explicit)
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


async def _devtools_url(proc: subprocess.Popen) -> str:
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, proc.stderr.readline)
        if not line:
            raise RuntimeError("chromium exited before its DevTools endpoint was ready")
        text = line.decode(errors="replace")
        if "DevTools listening on " in text:
            return text.split("DevTools listening on ", 1)[1].strip()


async def _render(binary: str, url: str, png: str, width: int, height: int, settle_s: float,
                  click_text: str | None, full_page: bool) -> dict[str, Any]:
    profile = tempfile.mkdtemp(prefix="avv-chromium-")
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             f"--window-size={width},{height}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    errors: list[str] = []
    try:
        browser_ws = await asyncio.wait_for(_devtools_url(proc), 30)
        port = browser_ws.split("//", 1)[1].split("/", 1)[0]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://{port}/json/list") as resp:
                targets = await resp.json()
            page_ws = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
            async with http.ws_connect(page_ws, max_msg_size=0) as ws:
                ids = iter(range(1, 10**9))
                pending: dict[int, asyncio.Future] = {}

                async def reader() -> None:
                    async for msg in ws:
                        data = json.loads(msg.data)
                        if "id" in data and data["id"] in pending:
                            pending.pop(data["id"]).set_result(data)
                        method, params = data.get("method"), data.get("params", {})
                        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
                            errors.append(f"console.{params['type']}: {args}")
                        elif method == "Runtime.exceptionThrown":
                            details = params["exceptionDetails"]
                            errors.append("exception: " + str(details.get("exception", {}).get("description")
                                                              or details.get("text")))
                        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                            entry = params["entry"]
                            errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

                async def call(method: str, **params: Any) -> dict[str, Any]:
                    msg_id = next(ids)
                    pending[msg_id] = asyncio.get_running_loop().create_future()
                    await ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
                    return (await asyncio.wait_for(pending[msg_id], 30)).get("result", {})

                task = asyncio.create_task(reader())
                for domain in ("Page", "Runtime", "Log"):
                    await call(f"{domain}.enable")
                await call("Page.navigate", url=url)
                await asyncio.sleep(settle_s)
                if click_text:  # e.g. a tab of the web UI, clicked as a person would
                    await call("Runtime.evaluate", expression=(
                        "Array.from(document.querySelectorAll('button,[role=tab],a'))"
                        f".find(e => e.innerText.trim().toUpperCase() === {json.dumps(click_text.upper())})?.click()"))
                    await asyncio.sleep(settle_s)
                text = (await call("Runtime.evaluate", expression="document.body.innerText", returnByValue=True))
                params: dict[str, Any] = {"format": "png"}
                if full_page:
                    size = (await call("Page.getLayoutMetrics"))["cssContentSize"]
                    params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                                    "height": min(size["height"], 12000), "scale": 1})
                shot = await call("Page.captureScreenshot", **params)
                with open(png, "wb") as fh:
                    fh.write(base64.b64decode(shot["data"]))
                task.cancel()
        return {"errors": errors, "text": text.get("result", {}).get("value", ""), "screenshot": png}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def render(url: str, png: str, *, width: int = 1400, height: int = 900, settle_s: float = 3.0,
           click_text: str | None = None, full_page: bool = False, binary: str | None = None) -> dict[str, Any]:
    """Load ``url``, wait ``settle_s`` (then click the element reading ``click_text`` and wait again), save a
    screenshot to ``png`` (the viewport, or with ``full_page`` the whole page up to 12000 px); {"errors":
    [...], "text": page text, "screenshot": png}."""
    binary = binary or find_chromium()
    if binary is None:
        raise RuntimeError("no Chromium binary found")
    return asyncio.run(_render(binary, url, png, width, height, settle_s, click_text, full_page))


def main(argv: list[str]) -> int:
    """``URL PNG [--click TEXT] [--full-page] [--settle S]`` → one JSON line on stdout."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("png")
    parser.add_argument("--click", default=None)
    parser.add_argument("--full-page", action="store_true")
    parser.add_argument("--settle", type=float, default=3.0)
    a = parser.parse_args(argv)
    print(json.dumps(render(a.url, a.png, click_text=a.click, full_page=a.full_page, settle_s=a.settle)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
