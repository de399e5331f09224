"""SOAP 1.2 with WSDL. The WSDL generated from what an endpoint deploys
(`GET /programs/{name}?wsdl`, `GET /?wsdl`) validates against the WSDL 1.1
and SOAP 1.2 binding schemas (xmllint, offline: tests/soap_schemas), its
embedded XML Schema compiles and takes the documents it describes (libxml2,
through lxml), and zeep, a real SOAP client, unmodified, loads it and calls
a program's operations through it (`POST /programs/{name}`); MTOM packages
and faults over plain HTTP."""

import hashlib
import os
import pickle
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import requests
import zeep
from lxml import etree
from zeep.transports import Transport

import services
from mpiws.service.serve import Server
from netns import install_packages

from conftest import ROOT

SCHEMAS = Path(__file__).parent / "soap_schemas"
WSDL = "{http://schemas.xmlsoap.org/wsdl/}"
XSD = "{http://www.w3.org/2001/XMLSchema}"

CAT_CWL = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "baseCommand": "cat",
    "inputs": {"files": {"type": "File[]", "inputBinding": {}}, "n": "int?", "1st": "string?"},
    "outputs": {"joined": {"type": "stdout"}},
}


@pytest.fixture(scope="module")
def host():
    programs = [
        f"add={ROOT / 'examples' / 'add.sh'} [in:val:x:int] [in:file:y:int] [out:file:result:int]",
        "copy=cp [in:file:src:binary] [out:file:dst:binary]",
        "sleep=sleep [in:val:seconds:float]",
    ]
    deployed = {
        "array_sum": services.array_sum,
        "block": services.block,
        "recv_raw": services.recv_raw,
        "recv_many": services.recv_many,
    }
    s = Server(deployed, programs=programs, cwl_programs=[("cat", CAT_CWL)])
    yield s
    s.stop()


def get(url, key):
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers["content-type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["content-type"], e.read()


def valid_wsdl(tmp_path, text):
    """The WSDL validated against the published schemas (its soap12 binding too) with xmllint, offline."""
    install_packages(xmllint="libxml2-utils")
    f = tmp_path / "doc.wsdl"
    f.write_bytes(text)
    p = subprocess.run(
        ["xmllint", "--nonet", "--noout", "--schema", str(SCHEMAS / "wsdl11-soap12-all.xsd"), str(f)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0 and "validates" in p.stderr, p.stderr
    return etree.fromstring(text)


def embedded_schema(doc):
    """The WSDL's types, compiled as an XML Schema (libxml2 refuses a malformed one)."""
    return etree.XMLSchema(doc.find(f"{WSDL}types/{XSD}schema"))


def test_a_programs_wsdl_validates_and_describes_it(host, tmp_path):
    status, ctype, text = get(f"{host.url}/programs/add?wsdl", host.key)
    assert (status, ctype) == (200, "text/xml; charset=utf-8")
    doc = valid_wsdl(tmp_path, text)
    ops = [o.get("name") for o in doc.findall(f"{WSDL}portType/{WSDL}operation")]
    assert ops == ["call", "spawn", "running", "results", "kill"]
    address = doc.find(f"{WSDL}service/{WSDL}port/{{http://schemas.xmlsoap.org/wsdl/soap12/}}address")
    assert address.get("location") == f"{host.url}/programs/add"
    # the schema takes a call with a value and a file by value or by URL, and refuses what the template does not name
    schema = embedded_schema(doc)
    ns = "urn:mpiws:program:add"
    ok = f'<call xmlns="{ns}"><x>1</x><y><value>41</value></y></call>'
    by_url = f'<call xmlns="{ns}"><x>1</x><y><url>http://example.org/y</url></y></call>'
    assert schema.validate(etree.fromstring(ok)) and schema.validate(etree.fromstring(by_url))
    for bad in (
        f'<call xmlns="{ns}"><x>one</x><y><value>41</value></y></call>',
        f'<call xmlns="{ns}"><x>1</x></call>',
        f'<call xmlns="{ns}"><x>1</x><y><value>4</value><url>http://e/</url></y></call>',
        f'<call xmlns="{ns}"><x>1</x><y><value>41</value></y><z>2</z></call>',
    ):
        assert not schema.validate(etree.fromstring(bad)), bad
    answer = f'<callResponse xmlns="{ns}"><jobId>j</jobId><state>done</state><exitCode>0</exitCode>'
    answer += (
        "<outputs><result><value>42</value></result></outputs><stdout><value>adding</value></stdout></callResponse>"
    )
    assert schema.validate(etree.fromstring(answer))


def test_a_cwl_tools_wsdl_has_its_lists_optional_inputs_and_xml_names(host, tmp_path):
    doc = valid_wsdl(tmp_path, get(f"{host.url}/programs/cat?wsdl", host.key)[2])
    inputs = {e.get("name"): e for e in doc.iter(f"{XSD}element") if e.getparent().getparent().get("name") == "Inputs"}
    assert set(inputs) == {"files", "n", "_1st"}, "a name that is no XML name is prefixed with _"
    assert inputs["files"].get("maxOccurs") == "unbounded" and inputs["n"].get("minOccurs") == "0"
    embedded_schema(doc)


def test_the_service_interfaces_wsdl_names_the_services_deployed(host, tmp_path):
    status, _, text = get(f"{host.url}/?wsdl", None)
    assert status == 200, "as GET /: it describes, it needs no key"
    doc = valid_wsdl(tmp_path, text)
    ops = [o.get("name") for o in doc.findall(f"{WSDL}portType/{WSDL}operation")]
    assert ops == ["run", "status", "cancel", "store", "bStore"]
    names = [e.get("value") for e in doc.iter(f"{XSD}enumeration")]
    assert names == ["array_sum", "block", "recv_raw", "recv_many"]
    embedded_schema(doc)


def test_zeep_loads_every_wsdl_and_sees_its_operations(host):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {host.key}"
    transport = Transport(session=session)
    for url, ops in [
        (f"{host.url}/programs/add?wsdl", {"call", "spawn", "running", "results", "kill"}),
        (f"{host.url}/programs/copy?wsdl", {"call", "spawn", "running", "results", "kill"}),
    ]:
        client = zeep.Client(url, transport=transport)
        (service,) = client.wsdl.services.values()
        (port,) = service.ports.values()
        assert set(port.binding._operations) == ops, url
    services = zeep.Client(f"{host.url}/?wsdl", transport=transport).wsdl.services
    ports = {name: set(next(iter(s.ports.values())).binding._operations) for name, s in services.items()}
    assert ports == {"ServicesService": {"run", "status", "cancel"}, "RankService": {"store", "bStore"}}
    add = zeep.Client(f"{host.url}/programs/add?wsdl", transport=transport)
    call = add.service._binding._operations["call"]
    assert [name for name, _ in call.input.body.type.elements] == ["x", "y"]


def test_a_programs_wsdl_is_behind_the_jobs_key(host):
    assert get(f"{host.url}/programs/add?wsdl", None)[0] == 401
    assert get(f"{host.url}/programs/nope?wsdl", host.key)[0] == 404


SOAP12 = "http://www.w3.org/2003/05/soap-envelope"


def client(host, program):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {host.key}"
    return zeep.Client(f"{host.url}/programs/{program}?wsdl", transport=Transport(session=session))


def test_zeep_calls_a_program_through_its_wsdl(host):
    add = client(host, "add")
    r = add.service.call(x=1, y={"value": 41})
    assert (r.state, r.exitCode, r.outputs.result.value, r.stdout.value) == ("done", 0, 42, "adding 1 and 41\n")
    job = add.service.spawn(x=2, y={"value": 40})
    assert job.url == f"{host.url}/jobs/{job.jobId}"
    t = time.monotonic() + 30
    while add.service.running(jobId=job.jobId).running and time.monotonic() < t:
        time.sleep(0.05)
    assert add.service.results(jobId=job.jobId).outputs.result.value == 42
    url = add.service.results(jobId=job.jobId, byReference=True).outputs.result.url
    assert get(url, None)[2] == b"42\n", "by reference: the job file's URL, a capability"
    # by reference in: another job's output, pulled from this endpoint's own disk
    assert add.service.call(x=0, y={"url": url}).outputs.result.value == 42
    # bytes both ways (base64Binary), and kill
    blob = bytes(range(256)) * 100
    assert client(host, "copy").service.call(src={"value": blob}).outputs.dst.value == blob
    sleep = client(host, "sleep")
    job = sleep.service.spawn(seconds=60)
    killed = sleep.service.kill(jobId=job.jobId)
    assert (killed.state, killed.running) == ("killed", False)


def test_refusals_are_soap_faults_with_the_json_routes_status(host):
    add = client(host, "add")
    with pytest.raises(zeep.exceptions.Fault) as e:
        add.service.running(jobId="0" * 32)
    assert e.value.code == "soap:Sender" and "no job" in e.value.message
    assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "404"
    with pytest.raises(zeep.exceptions.Fault) as e:
        add.service.call(x="one", y={"value": 1})  # zeep sends what it is given
    assert "not an integer" in e.value.message
    sleep = client(host, "sleep")
    job = sleep.service.spawn(seconds=60)
    with pytest.raises(zeep.exceptions.Fault) as e:
        sleep.service.results(jobId=job.jobId)
    assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "409"
    sleep.service.kill(jobId=job.jobId)


def post(host, program, body, content_type="application/soap+xml; charset=utf-8", key=True):
    h = {"content-type": content_type, **({"authorization": f"Bearer {host.key}"} if key else {})}
    return requests.post(f"{host.url}/programs/{program}", data=body, headers=h, timeout=60)


def envelope(body):
    return f'<s:Envelope xmlns:s="{SOAP12}"><s:Body>{body}</s:Body></s:Envelope>'.encode()


def fault_of(r):
    doc = etree.fromstring(r.content)
    f = doc.find(f"{{{SOAP12}}}Body/{{{SOAP12}}}Fault")
    assert f is not None, r.content
    code = f.find(f"{{{SOAP12}}}Code/{{{SOAP12}}}Value").text
    return code, f.find(f"{{{SOAP12}}}Reason/{{{SOAP12}}}Text").text


def test_faults_for_what_is_no_soap_12_request_and_for_no_key(host):
    call = '<call xmlns="urn:mpiws:program:add"><x>1</x><y><value>1</value></y></call>'
    r = post(host, "add", envelope(call), key=False)
    assert r.status_code == 401 and r.headers["content-type"].startswith("application/soap+xml")
    assert fault_of(r)[0] == "soap:Sender"
    v11 = b'<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body/></e:Envelope>'
    assert (post(host, "add", v11).status_code, fault_of(post(host, "add", v11))[0]) == (500, "soap:VersionMismatch")
    billion = b'<!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>' + envelope("<call>&b;</call>")
    r = post(host, "add", billion)
    assert r.status_code == 400 and "DTD" in fault_of(r)[1]
    header = '<s:Header><h:x xmlns:h="urn:h" s:mustUnderstand="true"/></s:Header>'
    r = post(host, "add", f'<s:Envelope xmlns:s="{SOAP12}">{header}<s:Body>{call}</s:Body></s:Envelope>'.encode())
    assert fault_of(r)[0] == "soap:MustUnderstand"
    r = post(host, "add", envelope('<call xmlns="urn:other"/>'))
    assert r.status_code == 400 and "namespace" in fault_of(r)[1]


def mtom(root, parts, boundary="MIMEBoundary_mpiws_test"):
    """An MTOM package as CXF or Axis2 send it: the envelope first (application/xop+xml), then each binary part."""
    body = [f'--{boundary}\r\nContent-Type: application/xop+xml; charset=UTF-8; type="application/soap+xml"\r\n']
    body.append("Content-Transfer-Encoding: binary\r\nContent-ID: <root.message@cxf.apache.org>\r\n\r\n")
    data = "".join(body).encode() + root + b"\r\n"
    for cid, content in parts.items():
        data += (
            f"--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n".encode()
        )
        data += f"Content-ID: <{cid}>\r\n\r\n".encode() + content + b"\r\n"
    data += f"--{boundary}--\r\n".encode()
    ctype = f'multipart/related; type="application/xop+xml"; boundary="{boundary}"; start="<root.message@cxf.apache.org>"; start-info="application/soap+xml"'
    return data, ctype


def unpack(r):
    """An MTOM answer: its envelope (parsed) and its parts' bytes by Content-ID."""
    from requests_toolbelt.multipart.decoder import MultipartDecoder

    assert r.headers["content-type"].startswith("multipart/related"), r.headers["content-type"]
    found = MultipartDecoder(r.content, r.headers["content-type"]).parts
    parts = {p.headers[b"Content-ID"].decode().strip("<>"): p.content for p in found}
    return etree.fromstring(found[0].content), parts


def test_an_mtom_attachment_is_a_files_value(host):
    blob = bytes(range(256)) * 4096 + b"\r\n--MIMEBoundary_mpiws_tes"  # 1 MiB, and what looks like a boundary
    include = '<xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:blob%401"/>'
    root = envelope(f'<call xmlns="urn:mpiws:program:copy"><src><value>{include}</value></src></call>')
    body, ctype = mtom(root, {"blob@1": blob})
    r = post(host, "copy", body, ctype)
    assert r.status_code == 200, r.content[:500]
    # A client that sends MTOM reads it: the output file is a part of the answer, named by its Include.
    answer, parts = unpack(r)
    xop = "{http://www.w3.org/2004/08/xop/include}Include"
    got = answer.find(f".//{{urn:mpiws:program:copy}}dst/{{urn:mpiws:program:copy}}value/{xop}")
    assert hashlib.sha256(parts[got.get("href")[4:]]).digest() == hashlib.sha256(blob).digest()
    body, ctype = mtom(root, {"other@1": blob})
    r = post(host, "copy", body, ctype)
    assert r.status_code == 400 and "no part has Content-ID <blob@1>" in fault_of(r)[1]


def test_zeep_runs_a_service_through_the_service_interface_wsdl(host, tmp_path):
    """`GET /?wsdl`: run with the endpoint key; status and cancel with the domain's token, as the JSON routes."""
    keyed = requests.Session()
    keyed.headers["Authorization"] = f"Bearer {host.key}"
    services = zeep.Client(f"{host.url}/?wsdl", transport=Transport(session=keyed))
    token = "t" * 32
    r = services.service.run(
        domain="soap-demo", rank=0, endpoints=[host.url], token=token, service="array_sum", params='{"n": 4}'
    )
    assert (r.domain, r.rank, r.service) == ("soap-demo", 0, "array_sum") and r.state in ("starting", "running", "done")
    tokened = requests.Session()
    tokened.headers["Authorization"] = f"Bearer {token}"
    watch = zeep.Client(f"{host.url}/?wsdl", transport=Transport(session=tokened))
    t = time.monotonic() + 30
    while (s := watch.service.status(domain="soap-demo", rank=0)).state != "done" and time.monotonic() < t:
        time.sleep(0.05)
    assert (s.state, s.result) == ("done", "6.0")
    # cancel: a blocked rank
    services.service.run(domain="soap-block", rank=0, endpoints=[host.url], token=token, service="block")
    assert watch.service.cancel(domain="soap-block", rank=0).state == "cancelled"
    # each operation its own credential: run needs the key, status the token
    with pytest.raises(zeep.exceptions.Fault) as e:
        watch.service.run(domain="x", rank=0, endpoints=[host.url], token=token, service="array_sum")
    assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "401"
    other = requests.Session()
    other.headers["Authorization"] = "Bearer " + "w" * 32
    with pytest.raises(zeep.exceptions.Fault) as e:
        zeep.Client(f"{host.url}/?wsdl", transport=Transport(session=other)).service.status(domain="soap-demo", rank=0)
    assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "403"


def rank_client(host, token, domain, rank):
    """zeep bound to a running rank's URL: the service interface WSDL's Rank port."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    c = zeep.Client(f"{host.url}/?wsdl", transport=Transport(session=session))
    return c, c.create_service("{urn:mpiws:services}RankSoap12Binding", f"{host.url}/domains/{domain}/ranks/{rank}")


def run_rank(host, domain, rank, size, service, params, token):
    r = requests.post(
        f"{host.url}/run",
        json={
            "domain": domain,
            "rank": rank,
            "endpoints": [host.url] * size,
            "token": token,
            "service": service,
            "params": params,
        },
        headers={"authorization": f"Bearer {host.key}"},
        timeout=30,
    )
    assert r.status_code == 201, r.text


def result_of(host, domain, rank, token):
    r = requests.get(
        f"{host.url}/domains/{domain}/ranks/{rank}?wait=30", headers={"authorization": f"Bearer {token}"}, timeout=40
    )
    return r.json()


def test_a_soap_store_is_filed_in_the_ranks_mailbox_in_order(host):
    """store: a third-party SOAP toolkit messages a running rank; same credentials, order and duplicates as a store."""
    token = "s" * 32
    run_rank(host, "soap-store", 0, 3, "recv_many", {"count": 3}, token)
    _, rank0 = rank_client(host, token, "soap-store", 0)
    assert rank0.store(source=1, tag=5, seq=0, payload=pickle.dumps("first")) is False, (
        "zeep gives the one element, duplicate"
    )
    assert rank0.store(source=1, tag=5, seq=0, payload=pickle.dumps("again")) is True, (
        "the same sequence number: a duplicate"
    )
    # an MTOM package, as CXF sends it, from another source
    include = '<xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:p1"/>'
    store = f'<store xmlns="urn:mpiws:services"><source>2</source><seq>0</seq><payload>{include}</payload></store>'
    body, ctype = mtom(envelope(store), {"p1": pickle.dumps(7)})
    r = requests.post(
        f"{host.url}/domains/soap-store/ranks/0",
        data=body,
        headers={"content-type": ctype, "authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.content
    assert rank0.store(source=1, tag=5, seq=1, payload=pickle.dumps("second")) is False
    got = result_of(host, "soap-store", 0, token)
    assert (got["state"], got["result"]) == ("done", ["first", 7, "second"]), got


def test_a_soap_store_checks_the_token_first_and_the_envelope(host):
    token = "u" * 32
    run_rank(host, "soap-refuse", 0, 2, "block", {}, token)
    _, wrong = rank_client(host, "w" * 32, "soap-refuse", 0)
    with pytest.raises(zeep.exceptions.Fault) as e:
        wrong.store(source=1, payload=b"x")
    assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "403"
    _, rank0 = rank_client(host, token, "soap-refuse", 0)
    with pytest.raises(zeep.exceptions.Fault) as e:
        rank0.store(source=7, payload=b"x")
    assert "out of range" in e.value.message
    with pytest.raises(zeep.exceptions.Fault) as e:
        rank0.bStore(source=1, payload=b"x")
    assert "forward" in e.value.message
    requests.delete(f"{host.url}/domains/soap-refuse/ranks/0", headers={"authorization": f"Bearer {token}"})


def test_a_64_mib_file_passes_both_ways_as_mtom_parts_in_bounded_memory(tmp_path):
    """spawn + running + results with 64 MiB in and out as MTOM parts: zeep reads the answer's part; the
    endpoint (its own process) streams both (its peak memory grows by far less than the file) and keeps no
    copy of the part once the job has its own."""
    from conftest import mpiws_serve
    from mpiws.keys import client_key

    work = tmp_path / "work"
    server, url = mpiws_serve(
        ["--program", "copy=cp [in:file:src:binary] [out:file:dst:binary]", "--workdir", str(work)]
    )
    try:

        def peak_kib():
            status = Path(f"/proc/{server.pid}/status").read_text()
            return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))

        before = peak_kib()
        blob = os.urandom(1 << 20) * 64
        include = '<xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:big%401"/>'
        root = envelope(f'<spawn xmlns="urn:mpiws:program:copy"><src><value>{include}</value></src></spawn>')
        body, ctype = mtom(root, {"big@1": blob})
        keyed = requests.Session()
        keyed.headers.update(
            {"Authorization": f"Bearer {client_key()}", "Accept": "multipart/related, application/soap+xml"}
        )
        r = keyed.post(
            f"{url}/programs/copy",
            data=iter([body[i : i + (1 << 20)] for i in range(0, len(body), 1 << 20)]),
            headers={"Content-Type": ctype},
        )
        assert r.status_code == 200, r.content[:300]
        job_id = etree.fromstring(r.content).find(".//{urn:mpiws:program:copy}jobId").text
        copy = zeep.Client(f"{url}/programs/copy?wsdl", transport=Transport(session=keyed))
        deadline = time.monotonic() + 60
        while copy.service.running(jobId=job_id).running and time.monotonic() < deadline:
            time.sleep(0.05)
        got = copy.service.results(jobId=job_id).outputs.dst.value  # zeep reads the MTOM part
        assert hashlib.sha256(got).digest() == hashlib.sha256(blob).digest()
        grew_mib = (peak_kib() - before) / 1024
        assert grew_mib < 32, f"the endpoint's peak memory grew by {grew_mib:.0f} MiB moving 64 MiB each way"
        deadline = time.monotonic() + 10
        while list((work / "files").iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list((work / "files").iterdir()) == [], "the part's file is gone once the job has its copy"
    finally:
        server.kill()
        server.wait()
