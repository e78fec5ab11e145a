"""A Connect worker whose REST API is secured as production clusters secure it: HTTPS (``listeners=https://...``,
``rest.advertised.listener=https``, a keystore made by the test's CA) and basic authentication
(Connect's ``BasicAuthSecurityRestExtension`` with a JAAS ``PropertyFileLoginModule`` and a password file), on the 3.x
line (the extension's 4.4.0 is not on Maven Central as this build reaches it: harness/jvm/pom.xml)."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .certs import PASSWORD, TestCA
from .java_process import START_WAIT, kafka_line, wait_until, write_properties
from .real_connect import ConnectCluster
from .real_kafka import KafkaCluster, Started

BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"


class SecuredConnect(Started):
    """One Connect 3.x worker (group ``name``) serving HTTPS with basic authentication: ``user``:``password``."""

    def __init__(self, kafka: KafkaCluster, workdir: Path, name: str, ca: TestCA, user: str = "connect",
                 password: str = "connect-secret") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.ca, self.user, self.password = ca, user, password
        (workdir / "connect.password").write_text(f"{user}: {password}\n", encoding="utf-8")
        jaas = workdir / "connect-jaas.conf"
        jaas.write_text(f'KafkaConnect {{\n  {LOGIN_MODULE} required\n  file="{workdir / "connect.password"}";\n}};\n',
                        encoding="utf-8")
        self.connect = ConnectCluster(kafka_line("kafka-3"), workdir / "connect", kafka, name, workers=1,
                                      jvm_options=[f"-Djava.security.auth.login.config={jaas}"])
        worker = self.worker = self.connect.workers[0]
        keystore = ca.server(f"{name}-rest")
        worker.settings.update({
            "listeners": f"https://127.0.0.1:{worker.port}", "rest.advertised.listener": "https",
            "listeners.https.ssl.keystore.location": str(keystore.jks),
            "listeners.https.ssl.keystore.password": PASSWORD, "listeners.https.ssl.key.password": PASSWORD,
            "listeners.https.ssl.keystore.type": "JKS", "rest.extension.classes": BASIC_AUTH_EXTENSION})
        write_properties(workdir / "connect" / "worker-0" / "worker.properties", worker.settings)
        self.url = f"https://127.0.0.1:{worker.port}"
        self.worker_id = worker.worker_id
        self._context = ssl.create_default_context(cafile=str(ca.cert))

    def start(self) -> None:
        self.worker.process.start()
        wait_until(lambda: self.request("GET", "/connectors")[0] == 200, START_WAIT, "the secured worker ready",
                   [self.worker.process], interval=0.5)

    def close(self) -> None:
        self.connect.close()

    def request(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        """A request with the worker's credentials, over HTTPS: (status, JSON body); (0, error) without an answer."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode())
                           .decode())
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._context) as answer:
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError as e:
            return 0, str(e)
