package server

import (
	"net/http"

	"github.com/nephele-dev/nephele/localcloud/api"
)

func (s *Server) faultList() api.FaultList {
	return api.FaultList{Faults: s.faults.Rules()}
}

func (s *Server) getFaults(*call) (int, any, error) {
	return http.StatusOK, s.faultList(), nil
}

func (s *Server) replaceFaults(c *call) (int, any, error) {
	var list api.FaultList
	if err := decode(c, "", &list); err != nil {
		return 0, nil, err
	}
	if err := s.faults.Replace(list.Faults); err != nil {
		return 0, nil, err
	}
	s.log.Info("fault rules replaced", "rules", len(list.Faults))
	return http.StatusOK, s.faultList(), nil
}

func (s *Server) clearFaults(*call) (int, any, error) {
	if err := s.faults.Replace(nil); err != nil {
		return 0, nil, err
	}
	s.log.Info("fault rules cleared")
	return http.StatusNoContent, nil, nil
}

// putFault adds or replaces the rule for the operation pattern in the path. The body
// may leave out the operation.
func (s *Server) putFault(c *call) (int, any, error) {
	op := c.r.PathValue("operation")
	var f api.Fault
	if err := decode(c, "fault", &f); err != nil {
		return 0, nil, err
	}
	if f.Operation == "" {
		f.Operation = op
	}
	if f.Operation != op {
		return 0, nil, invalid("fault.operation", "%q does not match the path's %q", f.Operation, op)
	}
	if err := s.faults.Put(f); err != nil {
		return 0, nil, err
	}
	s.log.Info("fault rule set", "operation", op)
	return http.StatusOK, s.faultList(), nil
}

func (s *Server) deleteFault(c *call) (int, any, error) {
	op := c.r.PathValue("operation")
	if !s.faults.Delete(op) {
		return 0, nil, errorf(http.StatusNotFound, api.ReasonNotFound, "no fault rule for %q", op)
	}
	s.log.Info("fault rule removed", "operation", op)
	return http.StatusNoContent, nil, nil
}
