package ogcets;

import java.io.ByteArrayInputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.net.URLStreamHandler;
import java.net.spi.URLStreamHandlerProvider;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Test harness only: serves http(s)://schemas.opengis.net/ogcapi/processes/part1/1.0/openapi/schemas/NAME
 * from the local directory given by -Dogcets.schemas=DIR (schemas.opengis.net cannot be reached here).
 * Every other URL is opened by the JDK's own handler, unchanged. Each request is logged to stderr.
 */
public class OfflineSchemas extends URLStreamHandlerProvider {
    static final String HOST = "schemas.opengis.net";
    static final String PREFIX = "/ogcapi/processes/part1/1.0/openapi/schemas/";

    @Override
    public URLStreamHandler createURLStreamHandler(String protocol) {
        if (!protocol.equals("http") && !protocol.equals("https")) return null;
        try {
            URLStreamHandler dflt = (URLStreamHandler) Class.forName("sun.net.www.protocol." + protocol + ".Handler")
                    .getDeclaredConstructor().newInstance();
            return new Handler(dflt);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static class Handler extends URLStreamHandler {
        final URLStreamHandler dflt;
        Handler(URLStreamHandler dflt) { this.dflt = dflt; }

        @Override
        protected URLConnection openConnection(URL u) throws IOException {
            if (HOST.equalsIgnoreCase(u.getHost())) return new Local(u);
            return new URL(null, u.toExternalForm(), dflt).openConnection();
        }

        @Override
        protected URLConnection openConnection(URL u, java.net.Proxy p) throws IOException {
            if (HOST.equalsIgnoreCase(u.getHost())) return new Local(u);
            return new URL(null, u.toExternalForm(), dflt).openConnection(p);
        }
    }

    static class Local extends HttpURLConnection {
        byte[] body;
        Local(URL u) { super(u); }
        @Override public void connect() throws IOException {
            if (connected) return;
            String path = url.getPath();
            String dir = System.getProperty("ogcets.schemas");
            Path f = path.startsWith(PREFIX) ? Paths.get(dir, path.substring(PREFIX.length())).normalize() : null;
            if (f != null && f.startsWith(Paths.get(dir)) && Files.isRegularFile(f)) {
                body = Files.readAllBytes(f);
                responseCode = 200;
            } else {
                responseCode = 404;
            }
            System.err.println("[offline-schemas] " + url + " -> " + responseCode);
            connected = true;
        }
        @Override public InputStream getInputStream() throws IOException {
            connect();
            if (body == null) throw new FileNotFoundException(url.toString());
            return new ByteArrayInputStream(body);
        }
        @Override public int getResponseCode() throws IOException { connect(); return responseCode; }
        @Override public String getHeaderField(String name) { return "Content-Type".equalsIgnoreCase(name) ? "application/yaml" : null; }
        @Override public void disconnect() {}
        @Override public boolean usingProxy() { return false; }
    }
}
