package cli

import (
	"net"
	"os"
)

// sdNotify tells systemd the service's state (sd_notify(3)): "READY=1" once
// the engine runs and the control API and metrics listen, "RELOADING=1"
// while a reload (SIGHUP, the control API) is applied, then "READY=1" with
// STATUS= its refusal if any, "STOPPING=1" when it drains. It is one
// datagram to the unix socket NOTIFY_SOCKET names (a leading '@' is the
// abstract namespace); without NOTIFY_SOCKET, as outside a Type=notify
// unit, it does nothing.
func sdNotify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
