#!/usr/bin/env python3
"""Drives the status page in headless Chromium as an operator would: opens a
source's page, types the admin token (and a name, and a reason) into its
fields and clicks its action buttons, one after the other, over the Chrome
DevTools Protocol (Debian's chromium and python3-websocket).

    page_actions.py URL TOKEN BY STEP...

STEP is "click:ACTION" (a button's data-action, e.g. pause), "reason:TEXT"
(typed into the reason field), "wait:MS", "width:PX" (the window that
wide, 900 px high, and the page laid out again), "reload" (the page again: the
token is asked for anew), "buttons" (the buttons shown) or "eval:EXPR" (a
script expression's value, e.g. a row's height). The page is a source's
page or the list. Prints one JSON
object per step: {"step", "result"} where result is #action-result's text
after the click settled, or the list of buttons. Exit 0 when every step ran.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


class Page:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(method + ": " + json.dumps(msg["error"]))
                return msg.get("result", {})

    def js(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("page script failed: " + json.dumps(r["exceptionDetails"])[:400])
        return r.get("result", {}).get("value")

    def until(self, expression, seconds=10.0):
        end = time.time() + seconds
        while time.time() < end:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise RuntimeError("timed out waiting for: " + expression)


def open_page(url):
    profile = tempfile.mkdtemp(prefix="tributary-cdp-")
    proc = subprocess.Popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir=" + profile, "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    end = time.time() + 20
    while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
        if time.time() > end:
            raise RuntimeError("chromium did not open its debugging port")
        time.sleep(0.05)
    port = open(port_file).read().split("\n")[0]
    targets = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port))
    target = next(t for t in targets if t["type"] == "page")
    ws = websocket.create_connection(target["webSocketDebuggerUrl"], suppress_origin=True, timeout=30)
    page = Page(ws)
    page.call("Page.enable")
    page.call("Runtime.enable")
    return proc, profile, page


def load(page, url):
    page.call("Page.navigate", url=url)
    page.until("document.readyState === 'complete' && (document.querySelector('#action-buttons button') !== null"
               " || document.querySelectorAll('#sources tr').length > 0)")
    # Dialogs (confirm) are answered yes: the operator means it.
    page.js("window.confirm = () => true; true")


def main():
    url, token, by, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    proc, profile, page = open_page(url)
    try:
        load(page, url)
        typed = False
        for step in steps:
            kind, _, arg = step.partition(":")
            if kind == "click":
                if not typed:
                    page.js("document.getElementById('admin-token').value = %s; true" % json.dumps(token))
                    typed = True
                page.js("document.getElementById('action-by').value = %s; true" % json.dumps(by))
                page.js("document.getElementById('action-result').textContent = ''; true")
                page.until("document.querySelector('#action-buttons button[data-action=%s]') !== null" %
                           json.dumps(arg))
                page.js("document.querySelector('#action-buttons button[data-action=%s]').click(); true" %
                        json.dumps(arg))
                result = page.until("document.getElementById('action-result').textContent")
                # The token field is emptied at once: it is kept in memory only.
                left = page.js("document.getElementById('admin-token').value + location.href")
                print(json.dumps({"step": step, "result": result, "left": left}), flush=True)
            elif kind == "reason":
                page.js("document.getElementById('action-reason').value = %s; true" % json.dumps(arg))
                print(json.dumps({"step": step, "result": "typed"}), flush=True)
            elif kind == "width":
                page.call("Emulation.setDeviceMetricsOverride", width=int(arg), height=900, deviceScaleFactor=1,
                          mobile=False)
                time.sleep(0.3)
                print(json.dumps({"step": step, "result": page.js("innerWidth")}), flush=True)
            elif kind == "wait":
                time.sleep(int(arg) / 1000.0)
                print(json.dumps({"step": step, "result": "waited"}), flush=True)
            elif kind == "reload":
                load(page, url)
                typed = False
                stored = page.js("JSON.stringify([localStorage.length, sessionStorage.length, document.cookie])")
                print(json.dumps({"step": step, "result": stored}), flush=True)
            elif kind == "eval":
                print(json.dumps({"step": step, "result": page.js(arg)}), flush=True)
            elif kind == "buttons":
                page.until("document.querySelector('#action-buttons button') !== null")
                names = page.js("[...document.querySelectorAll('#action-buttons button')]"
                                ".map(b => b.dataset.action).join(' ')")
                print(json.dumps({"step": step, "result": names}), flush=True)
            else:
                raise RuntimeError("unknown step: " + step)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
