package external

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// PluginConns is the running plugin of stage's go-plugin connection (which
// carries StagePlugin) and the broker's connection to its own services.
func PluginConns(stage string) (main, brokered *grpc.ClientConn) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, sv := range supervisors {
		if sv.name != stage {
			continue
		}
		sv.mu.Lock()
		client, conn := sv.client, sv.conn
		sv.mu.Unlock()
		if client == nil {
			continue // a stage built and never started (newEngine) stays registered
		}
		proto, err := client.Client()
		if err != nil {
			return nil, nil
		}
		g, _ := proto.(*plugin.GRPCClient)
		if g == nil {
			return nil, conn
		}
		return g.Conn, conn
	}
	return nil, nil
}

// SetCgroupParent makes plugins' cgroups under dir, until restore.
func SetCgroupParent(dir string) (restore func()) {
	old := cgroupParent
	cgroupParent = func() (string, error) { return dir, nil }
	return func() { cgroupParent = old }
}

// SetDefaultUser makes name the user a plugin with no user runs as, until
// restore.
func SetDefaultUser(name string) (restore func()) {
	old := defaultUser
	defaultUser = name
	return func() { defaultUser = old }
}

// CgroupParent is where plugins' cgroups are made: linerate's own cgroup.
func CgroupParent() (string, error) { return cgroupParent() }
