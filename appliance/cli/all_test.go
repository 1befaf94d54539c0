package cli

// The tests run engines with every built-in stage, as the linerate binary does.
import _ "github.com/linerate/linerate/appliance/all"
