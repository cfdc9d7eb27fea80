"""A throwaway certificate authority and a server certificate it signed for
127.0.0.1, made with openssl at test time, as a real HTTPS origin needs:
clients verify the chain with --cacert ca.pem, not by trusting one
self-signed certificate."""
import os
import subprocess


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory):
    """Writes ca.pem, cert.pem and key.pem into directory; returns
    (ca, certificate, key) paths."""
    d = str(directory)
    ca_key, ca, key, csr, cert = (os.path.join(d, n) for n in
                                  ("ca-key.pem", "ca.pem", "key.pem", "req.pem", "cert.pem"))
    ext = os.path.join(d, "server.ext")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", "/CN=httphsm test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", ca_key, "-out", ca)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
                "basicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-days", "2", "-extfile", ext, "-out", cert)
    return ca, cert, key
